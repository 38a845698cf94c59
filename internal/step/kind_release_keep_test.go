package step

import (
	"testing"

	"github.com/gpuctl/gpuctl/internal/plan"
)

// TestSubchartObjects: what an adoption keeps of NVIDIA's NFD subchart is the subchart's objects (by
// its chart labels) that gpuctl's chart does not render; the operator's own objects go as Helm's
// upgrade decides.
func TestSubchartObjects(t *testing.T) {
	deployed := `apiVersion: v1
kind: ServiceAccount
metadata: {name: node-feature-discovery, labels: {helm.sh/chart: node-feature-discovery-0.18.2}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: gpu-operator-node-feature-discovery-worker, namespace: gpu-operator, labels: {app.kubernetes.io/name: node-feature-discovery}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: gpu-operator-node-feature-discovery, labels: {helm.sh/chart: node-feature-discovery-0.18.2}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: gpu-operator, labels: {helm.sh/chart: gpu-operator-v26.7.0}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: gpu-operator-old, labels: {helm.sh/chart: gpu-operator-v26.7.0}}
`
	next := `apiVersion: apps/v1
kind: Deployment
metadata: {name: gpu-operator}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: gpu-operator-node-feature-discovery}
`
	got, err := subchartObjects(deployed, next, &plan.KeptSubchart{Release: "gpu-operator", Namespace: "gpu-operator", Chart: "node-feature-discovery"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range got {
		names = append(names, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	want := []string{"ServiceAccount gpu-operator/node-feature-discovery", "DaemonSet gpu-operator/gpu-operator-node-feature-discovery-worker"}
	if len(names) != len(want) || names[0] != want[0] || names[1] != want[1] {
		t.Errorf("kept %v, want %v (the ClusterRole the new chart renders is the release's; the operator's own objects are not kept)", names, want)
	}
}
