package render

import (
	"strings"
	"testing"
)

func TestDiffManifests(t *testing.T) {
	from := `---
# Source: gpu-operator/templates/operator.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: gpu-operator
  namespace: gpu-operator
spec:
  image: nvcr.io/nvidia/gpu-operator:v25.10.1
---
# Source: gpu-operator/templates/serviceaccount.yaml
apiVersion: v1
kind: ServiceAccount
metadata:
  name: gpu-operator
  namespace: gpu-operator
---
# Source: gpu-operator/templates/clusterpolicy.yaml
apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata:
  name: cluster-policy
spec:
  driver:
    version: "580.95.05"
---
# Source: gpu-operator/templates/old.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: old
  namespace: gpu-operator
`
	to := strings.NewReplacer("v25.10.1", "v26.7.0", "580.95.05", "590.48.01",
		"kind: ConfigMap\nmetadata:\n  name: old", "kind: ConfigMap\nmetadata:\n  name: new").Replace(from)

	diffs, err := DiffManifests("gpu-operator", from, to)
	if err != nil {
		t.Fatal(err)
	}
	var objects []string
	for _, d := range diffs {
		objects = append(objects, d.Change+" "+d.Object)
	}
	want := []string{
		"changed ClusterPolicy cluster-policy",
		"added ConfigMap gpu-operator/new",
		"removed ConfigMap gpu-operator/old",
		"changed Deployment gpu-operator/gpu-operator",
	}
	if strings.Join(objects, "\n") != strings.Join(want, "\n") {
		t.Fatalf("diffs\n%s\nwant (ClusterPolicy first, unchanged objects left out)\n%s", strings.Join(objects, "\n"), strings.Join(want, "\n"))
	}
	cp := diffs[0].Diff
	for _, line := range []string{`-    version: "580.95.05"`, `+    version: "590.48.01"`, "--- deployed ClusterPolicy cluster-policy", "+++ upgrade ClusterPolicy cluster-policy"} {
		if !strings.Contains(cp, line) {
			t.Errorf("ClusterPolicy diff lacks %q:\n%s", line, cp)
		}
	}
	if strings.Contains(cp, "# Source:") {
		t.Errorf("the diff carries Helm's source comments:\n%s", cp)
	}

	same, err := DiffManifests("gpu-operator", from, from)
	if err != nil || len(same) != 0 {
		t.Errorf("an unchanged manifest diffs as %v, %v", same, err)
	}
}
