package plan

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/internal/taint"
)

func obj(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind, "metadata": map[string]any{"name": name}}}
	if ns != "" {
		u.SetNamespace(ns)
	}
	if spec != nil {
		u.Object["spec"] = spec
	}
	return u
}

func TestReleaseObjects(t *testing.T) {
	sa := obj("ServiceAccount", "gpu-operator", "operator", nil)
	cm := obj("ConfigMap", "gpu-operator", "config", map[string]any{"a": "1"})
	cmChanged := obj("ConfigMap", "gpu-operator", "config", map[string]any{"a": "2"})
	old := obj("Service", "gpu-operator", "metrics", nil)
	tests := []struct {
		name               string
		op                 string
		rendered, deployed []*unstructured.Unstructured
		recreate           []string
		want               []string
		wantGone           []string
	}{
		{"an install creates every rendered object", ReleaseInstall, []*unstructured.Unstructured{sa, cm}, nil, nil,
			[]string{"create ServiceAccount gpu-operator/operator", "create ConfigMap gpu-operator/config"}, nil},
		{"an upgrade updates what changed, leaves what did not, creates what is new and deletes what is no longer rendered", ReleaseUpgrade,
			[]*unstructured.Unstructured{sa, cmChanged}, []*unstructured.Unstructured{cm, old}, nil,
			[]string{"create ServiceAccount gpu-operator/operator", "update ConfigMap gpu-operator/config"}, []string{"Service gpu-operator/metrics"}},
		{"an upgrade that renders an object the same leaves it", ReleaseUpgrade, []*unstructured.Unstructured{cm}, []*unstructured.Unstructured{cm}, nil,
			[]string{"unchanged ConfigMap gpu-operator/config"}, nil},
		{"an upgrade creates an object rendered the same that is gone from the cluster", ReleaseUpgrade,
			[]*unstructured.Unstructured{sa, cm}, []*unstructured.Unstructured{sa, cm}, []string{"ConfigMap gpu-operator/config"},
			[]string{"unchanged ServiceAccount gpu-operator/operator", "create ConfigMap gpu-operator/config"}, nil},
		{"an unchanged release writes nothing", ReleaseUnchanged, []*unstructured.Unstructured{cm}, []*unstructured.Unstructured{cm}, nil, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			writes, gone := ReleaseObjects("release-x", tc.op, tc.rendered, tc.deployed, tc.recreate)
			var got, gotGone []string
			for _, w := range writes {
				if w.Step != "release-x" {
					t.Errorf("%s: step %q", w, w.Step)
				}
				got = append(got, w.String())
			}
			for _, g := range gone {
				gotGone = append(gotGone, g.GetKind()+" "+g.GetNamespace()+"/"+g.GetName())
			}
			if !slices.Equal(got, tc.want) || !slices.Equal(gotGone, tc.wantGone) {
				t.Errorf("writes %v, gone %v\nwant %v, %v", got, gotGone, tc.want, tc.wantGone)
			}
		})
	}
}

func taintPlan(nodes []string, skip string) *Plan {
	return &Plan{Steps: []Step{{ID: "taint", Kind: KindTaint, Skip: skip,
		Taint: &Taint{Key: TaintKey, Value: TaintValue, Effect: TaintEffect, Nodes: nodes}}}}
}

func TestTaintWrites(t *testing.T) {
	tests := []struct {
		name  string
		p     *Plan
		nodes []corev1.Node
		want  []NodeChange
	}{
		{"each named GPU node without the taint gets it; other nodes and nodes that have it already are not written",
			taintPlan([]string{"gpu-1", "gpu-2", "gpu-3"}, ""),
			[]corev1.Node{testNode("gpu-3", ""), testNode("gpu-2", gpuRecord, taint.GPUTaint), testNode("gpu-1", "", usersGPUTaint), testNode("cpu-1", "")},
			[]NodeChange{{Node: "gpu-3", Action: ActionAdd, Taints: []TaintSpec{gpuSpec}}}},
		{"a skipped taint step writes no node", taintPlan([]string{"gpu-1"}, "--no-taint"), []corev1.Node{testNode("gpu-1", "")}, nil},
		{"a plan without a taint step writes no node", &Plan{}, []corev1.Node{testNode("gpu-1", "")}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := TaintWrites(tc.p, tc.nodes); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestWritesSummary(t *testing.T) {
	w := &Writes{
		Objects: []ObjectWrite{{Kind: "Namespace", Name: "gpu-operator", Action: WriteCreate}, {Kind: "ConfigMap", Namespace: "gpu-operator", Name: "c", Action: WriteUnchanged},
			{Kind: "Deployment", Namespace: "gpu-operator", Name: "gpu-operator", Action: WriteUpdate}},
		Deletes:     []ObjectDelete{{Kind: "Service", Namespace: "gpu-operator", Name: "old", UID: "u1"}},
		CRDs:        []CRDWrite{{Name: "clusterpolicies.nvidia.com", Action: WriteCreate}, {Name: "nvidiadrivers.nvidia.com", Action: WriteKeep, Reason: "newer"}},
		Releases:    []ReleaseWrite{{Name: "gpu-operator", Namespace: "gpu-operator", Chart: "gpu-operator", ChartVersion: "v26.7.0", Operation: ReleaseUpgrade, Revision: 3, FromRevision: 2}},
		Nodes:       []NodeChange{{Node: "gpu-1", Action: ActionAdd, Taints: []TaintSpec{gpuSpec}}},
		NodeRule:    NodeRuleText,
		Bookkeeping: []ObjectWrite{{Kind: "Lease", Namespace: "kube-system", Name: "gpuctl", Action: WriteCreate}},
	}
	got := strings.Join(w.Summary(), "\n")
	for _, want := range []string{
		"3 objects: 1 create, 1 update, 1 unchanged",
		"delete 1 objects: Service gpu-operator/old",
		"2 CRDs: 1 create, 1 keep",
		"release: upgrade gpu-operator/gpu-operator from revision 2 to 3 (gpu-operator v26.7.0)",
		"taint node/gpu-1: add nvidia.com/gpu=present:NoSchedule",
		"taint the nodes above and any GPU node NFD labels before the taint step",
		"create Lease kube-system/gpuctl (gpuctl's own)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary does not say %q:\n%s", want, got)
		}
	}
}
