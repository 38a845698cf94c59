package engine

import (
	"fmt"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
)

// installInputs are an install's inputs as read and judged before anything touches the cluster: the
// values files parsed, the --set expressions parsed, the operator release resolved to its bundle and
// charts. Install.Run reads them before it takes the lock, so a mistake in them is refused with
// nothing written, the lock's Lease included; the plan is built from them after detection.
type installInputs struct {
	// files are the values files as read (upgrade's recorded layers first), for the plan and the record.
	files  []plan.Layer
	set    map[string]any
	bundle bundle.Bundle
	charts map[string]plan.ChartInfo
	// adopt is the release --adopt takes over, read after detection (nil: none).
	adopt *plan.Adopted
	// adopted is the values layer of a release an earlier install adopted: the options' (upgrade's),
	// else the install record's (readAdoption).
	adopted *plan.Layer
}

// readInputs reads and judges o without the cluster. Every mistake wraps plan.ErrInput.
func readInputs(o InstallOptions) (*installInputs, error) {
	files, err := parseValueLayers(o)
	if err != nil {
		return nil, err
	}
	set, err := release.ParseSet(o.Set)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", plan.ErrInput, err)
	}
	if _, err := plan.ParseSharing(o.Sharing); err != nil {
		return nil, err
	}
	if _, err := plan.ParseMIG(o.MIG); err != nil {
		return nil, err
	}
	if err := plan.CheckSharingMIGInputs(o.Sharing, o.MIG); err != nil {
		return nil, err
	}
	b, err := bundle.Get(o.OperatorVersion)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", plan.ErrInput, err)
	}
	infos, err := render.ChartInfos(b.Version)
	if err != nil {
		return nil, err
	}
	if err := checkUserValuesSize(files, set); err != nil {
		return nil, err
	}
	if o.DRA {
		user := map[string]any{}
		for _, f := range files {
			user = plan.MergeValues(user, f.Values)
		}
		if err := plan.CheckDRAInputs(infos[plan.OperatorRelease].AppVersion, plan.MergeValues(user, set), o.Sharing); err != nil {
			return nil, err
		}
	}
	return &installInputs{files: files, set: set, bundle: b, charts: infos, adopted: o.AdoptedValues}, nil
}

// checkUserValuesSize refuses -f and --set values that alone make a release too large for Helm's
// storage, whatever the cluster: the release record holds its values (the user's win over every
// other layer, so all of them are in it), and the record's encoding of those values alone is a floor
// of its size. Preflight measures the whole rendered release after detection; this is the part that
// needs no cluster, so such values are refused before the lock is taken.
func checkUserValuesSize(files []plan.Layer, set map[string]any) error {
	user := map[string]any{}
	for _, f := range files {
		user = plan.MergeValues(user, f.Values)
	}
	user = plan.MergeValues(user, set)
	// As plan.Build splits them: the node-feature-discovery section is the NFD release's values.
	nfd, _ := user[plan.NFDRelease].(map[string]any)
	operator := make(map[string]any, len(user))
	for k, v := range user {
		if k != plan.NFDRelease {
			operator[k] = v
		}
	}
	for _, r := range []struct {
		name   string
		values map[string]any
	}{{plan.OperatorRelease, operator}, {plan.NFDRelease, nfd}} {
		if len(r.values) == 0 {
			continue
		}
		n, err := preflight.EncodedSize(map[string]any{"config": r.values})
		if err != nil {
			return fmt.Errorf("%w: values of release %s: %w", plan.ErrInput, r.name, err)
		}
		if n > preflight.MaxReleaseSize {
			return fmt.Errorf("%w: release %s would be stored in at least %s by its -f and --set values alone (JSON, gzipped and base64-encoded, as Helm stores a release); a Secret holds at most %s: leave out what the chart does not need",
				plan.ErrInput, r.name, mebibytes(n), mebibytes(preflight.MaxReleaseSize))
		}
	}
	return nil
}

func mebibytes(n int) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
