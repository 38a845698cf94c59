package engine

import (
	"encoding/json"
	"reflect"

	"github.com/gpuctl/gpuctl/internal/release"
)

// releaseState is a release as a hop of an upgrade's path leaves it: what the next hop's preview
// starts from, before the first write (the cluster still runs the installed release then).
type releaseState struct {
	// chart is "<name>-<version>", app the chart's app version, revision the Helm revision.
	chart, app string
	revision   int
	// digest is the chart's content digest (release.ChartDigest), values the release's values and
	// manifest its rendering: what Helm compares to decide that a release is unchanged.
	digest   string
	values   map[string]any
	manifest string
}

// chainMove is move (release.PreviewApply's verdict against the deployed revision) as a move from
// before, the release as the hop before leaves it: unchanged when the chart and values are the same,
// as Helm decides it (release.Client.Apply), else an upgrade to the revision after before's. Nothing is
// recreated: the hop before recreates what is missing. It returns the release as this hop leaves it.
func chainMove(move ReleaseChange, before *releaseState, after releaseState) (ReleaseChange, releaseState) {
	move.FromChart, move.FromApp, move.FromRevison, move.Recreate = before.chart, before.app, before.revision, nil
	if before.digest != "" && before.digest == after.digest && sameJSON(before.values, after.values) {
		move.Outcome = release.Unchanged
		return move, *before
	}
	move.Outcome = release.WouldUpgrade
	after.revision = before.revision + 1
	return move, after
}

// sameJSON reports whether two values maps are the same once encoded, as Helm stores them.
func sameJSON(a, b map[string]any) bool {
	norm := func(v map[string]any) (map[string]any, bool) {
		out := map[string]any{}
		if len(v) == 0 {
			return out, true
		}
		data, err := json.Marshal(v)
		return out, err == nil && json.Unmarshal(data, &out) == nil
	}
	na, okA := norm(a)
	nb, okB := norm(b)
	return okA && okB && reflect.DeepEqual(na, nb)
}
