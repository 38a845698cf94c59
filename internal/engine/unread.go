package engine

import (
	"fmt"
	"strings"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/render"
)

// unreadValues is a warning naming the user's operator values (a release gpuctl adopted, -f files,
// --set) that NVIDIA's chart of the release installed does not read, so they change nothing; "" when
// it reads them all. A key of gpuctl's own chart that NVIDIA's values never had is read (by ours),
// and the NFD section goes to NFD's release. Upgrade names such keys itself, as findings to accept.
func unreadValues(version string, user map[string]any) (string, error) {
	facts, err := bundle.LoadValuesFacts()
	if err != nil {
		return "", err
	}
	unread, err := facts.Unread(version, user)
	if err != nil || len(unread) == 0 {
		return "", err
	}
	ours, err := render.ChartDefaults(plan.OperatorRelease, version)
	if err != nil {
		return "", err
	}
	nvidia := facts.Releases[version].Defaults
	var keys []string
	for _, u := range unread {
		if !hasKey(nvidia, u.Key) && under(ours, u.Key) {
			continue // gpuctl's own key (docs/nvidia-chart-deviations.md)
		}
		k := u.Key
		if u.Replacement != "" {
			k += " (NVIDIA renamed it " + u.Replacement + ")"
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return "", nil
	}
	return fmt.Sprintf("values NVIDIA's gpu-operator chart %s does not read, so they change nothing: %s", version, strings.Join(keys, ", ")), nil
}

// hasKey: NVIDIA's values.yaml (its scalar leaves by dotted path) has key, a key under it, or a parent.
func hasKey(defaults map[string]any, key string) bool {
	for k := range defaults {
		if k == key || strings.HasPrefix(k, key+".") || strings.HasPrefix(key, k+".") {
			return true
		}
	}
	return false
}

// under: the dotted key, or a parent of it, is a key of values.
func under(values map[string]any, key string) bool {
	var v any = values
	for _, p := range strings.Split(key, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return true // a parent holds a scalar or list: the key is part of its value
		}
		if v, ok = m[p]; !ok {
			return false
		}
	}
	return true
}

// userOperatorValues are the values the user gave the operator release, merged as the plan merges
// them: an adopted release's, the -f files, then --set.
func userOperatorValues(o InstallOptions, in *installInputs) map[string]any {
	out := map[string]any{}
	switch {
	case in.adopt != nil:
		out = plan.MergeValues(out, in.adopt.User)
	case in.adopted != nil:
		out = plan.MergeValues(out, in.adopted.Values)
	}
	for _, f := range in.files {
		out = plan.MergeValues(out, f.Values)
	}
	return plan.MergeValues(out, in.set)
}
