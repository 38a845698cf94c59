package wizard

import (
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/ui"
)

// valueLines flattens a release's values to key=value lines that differ from the chart's defaults,
// each with the layer it comes from (the last layer that sets a key wins, as in the Plan), and
// counts the values that only repeat a default.
func valueLines(r *plan.Release, defaults map[string]any) []string {
	source := map[string]string{}
	for _, l := range r.Layers {
		for k := range flatten("", l.Values) {
			source[k] = l.Source
		}
	}
	flat, def := flatten("", r.Values), flatten("", defaults)
	keys := make([]string, 0, len(flat))
	same := 0
	for k, v := range flat {
		if d, ok := def[k]; ok && d == v {
			same++
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rows := make([][]string, 0, len(keys))
	for _, k := range keys {
		rows = append(rows, []string{k + "=" + flat[k], "(" + ui.OrNone(source[k], "-") + ")"})
	}
	out := table(rows)
	if len(rows) == 0 {
		out = []string{"(none: the chart's defaults)"}
	}
	if same > 0 {
		out = append(out, fmt.Sprintf("(and %s set to the chart's default)", ui.Plural(same, "value")))
	}
	return out
}

// flatten maps nested values to dotted keys; lists and scalars are leaves, written as compact YAML.
func flatten(prefix string, v map[string]any) map[string]string {
	out := map[string]string{}
	for k, x := range v {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		if sub, ok := x.(map[string]any); ok && len(sub) > 0 {
			for kk, vv := range flatten(key, sub) {
				out[kk] = vv
			}
			continue
		}
		out[key] = compact(x)
	}
	return out
}

func compact(x any) string {
	switch x.(type) {
	case string:
		return fmt.Sprint(x)
	}
	b, err := yaml.Marshal(x)
	if err != nil {
		return fmt.Sprint(x)
	}
	s := strings.TrimSpace(string(b))
	if strings.Contains(s, "\n") {
		j, err := yaml.YAMLToJSON(b)
		if err == nil {
			return string(j)
		}
	}
	return s
}
