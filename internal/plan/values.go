package plan

import (
	"encoding/json"
	"slices"
	"strings"
)

// nfdSection is the key under which profiles, -f files and --set hold values for the NFD chart. It is
// also the NFD subchart's key in NVIDIA's gpu-operator chart, so the same file works with that chart.
const nfdSection = "node-feature-discovery"

// MergeValues is merge for the engine, which layers run-time values (tolerations the safety check
// adds, an OLM channel, ClusterPolicy overrides) with the same rules as the plan's layers.
func MergeValues(dst, src map[string]any) map[string]any { return merge(dst, src) }

// AddDetectedLayer puts l among the detected facts — above the profile and what detection found, below
// the -f files and --set — and recomputes Values. The safety check adds the tolerations it finds
// necessary at run time this way, so a first run gives the values a later run's detection gives (the
// same layer order), and the user's -f and --set still win over them.
func (r *Release) AddDetectedLayer(l Layer) {
	i := slices.IndexFunc(r.Layers, userLayer)
	if i < 0 {
		i = len(r.Layers)
	}
	r.Layers = slices.Insert(slices.Clone(r.Layers), i, l)
	r.Values = flatten(r.Layers)
}

// userLayer is true for the layers the user gave: -f files and --set (Build names them so).
func userLayer(l Layer) bool { return strings.HasPrefix(l.Source, "file ") || l.Source == "--set" }

// merge returns a copy of dst with src merged over it: maps merge key by key, anything else (lists
// included, as Helm does) is replaced. A nil value in src deletes the key, as `--set key=null` does.
func merge(dst, src map[string]any) map[string]any {
	out := clone(dst)
	for k, v := range src {
		if v == nil {
			delete(out, k)
			continue
		}
		sm, srcIsMap := v.(map[string]any)
		dm, dstIsMap := out[k].(map[string]any)
		if srcIsMap && dstIsMap {
			out[k] = merge(dm, sm)
			continue
		}
		out[k] = cloneValue(v)
	}
	return out
}

// CloneValues deep-copies values or an object (maps and slices; leaves are immutable and shared), so
// that what a caller builds from a Plan never aliases it.
func CloneValues(m map[string]any) map[string]any { return clone(m) }

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return clone(t)
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = cloneValue(x)
		}
		return out
	default:
		return v
	}
}

// split separates the NFD section from the gpu-operator values of one layer.
func split(v map[string]any) (operator, nfd map[string]any) {
	operator = clone(v)
	nfd, _ = operator[nfdSection].(map[string]any)
	delete(operator, nfdSection)
	if nfd == nil {
		nfd = map[string]any{}
	}
	return operator, nfd
}

// set puts value at a dotted path, creating maps on the way.
func set(m map[string]any, value any, path ...string) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = value
}

// normalized returns v as it would look after a JSON round trip (ints become float64), so layers
// from YAML files, Go literals and --set compare and print alike.
func normalized(v map[string]any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	out := map[string]any{}
	if err := json.Unmarshal(b, &out); err != nil {
		return v
	}
	return out
}
