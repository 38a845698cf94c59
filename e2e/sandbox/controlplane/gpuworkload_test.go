package controlplane

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestGPUWorkloadStages(t *testing.T) {
	for _, tc := range []struct {
		name   string
		broken []string
		want   map[string]string // stage name → the .spec.nodeName requirement's operator ("" = none)
	}{
		{name: "without broken nodes every GPU workload completes", want: map[string]string{"gpu-workload-complete": ""}},
		{name: "broken nodes fail their workloads and only theirs", broken: []string{"gpu-worker-3"},
			want: map[string]string{"gpu-workload-complete": "NotIn", "gpu-workload-fail-broken-gpu": "In"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs := strings.Split(gpuWorkloadStages(tc.broken), "\n---\n")
			if len(docs) != len(tc.want) {
				t.Fatalf("%d stages, want %d", len(docs), len(tc.want))
			}
			for _, d := range docs {
				var st struct {
					Metadata struct{ Name string }
					Spec     struct {
						Weight   int
						Selector struct {
							MatchExpressions []struct {
								Key, Operator string
								Values        []string
							} `json:"matchExpressions"`
						}
					}
				}
				if err := yaml.Unmarshal([]byte(d), &st); err != nil {
					t.Fatalf("stage does not parse: %v\n%s", err, d)
				}
				op, ok := tc.want[st.Metadata.Name]
				if !ok {
					t.Fatalf("unexpected stage %q", st.Metadata.Name)
				}
				// Weight above kwok's pod-ready (0) is what makes the stage win.
				if st.Spec.Weight <= 0 {
					t.Errorf("%s: weight %d, want > 0", st.Metadata.Name, st.Spec.Weight)
				}
				gotOp, gpu := "", false
				for _, e := range st.Spec.Selector.MatchExpressions {
					switch e.Key {
					case ".spec.nodeName":
						gotOp = e.Operator
						if strings.Join(e.Values, ",") != strings.Join(tc.broken, ",") {
							t.Errorf("%s: nodes %v, want %v", st.Metadata.Name, e.Values, tc.broken)
						}
					case gpuRequestQuery:
						gpu = e.Operator == "Exists"
					case ".spec.restartPolicy":
						if strings.Contains(strings.Join(e.Values, ","), "Always") {
							t.Errorf("%s selects long-running pods", st.Metadata.Name)
						}
					}
				}
				if gotOp != op || !gpu {
					t.Errorf("%s: node operator %q (want %q), selects GPU pods %v", st.Metadata.Name, gotOp, op, gpu)
				}
			}
		})
	}
}
