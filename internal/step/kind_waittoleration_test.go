package step

import (
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// taintPlan is what plan.Build gives where detection saw no GPU node yet (NFD had not run) on a
// Kubernetes 1.37 cluster without ExtendedResourceToleration: gpuctl's policy, its wait, the taint.
func taintPlan(forced bool) *plan.Plan {
	opValues := map[string]any{plan.PolicyValue: map[string]any{"enabled": true}}
	return &plan.Plan{Namespace: "gpu-operator", Steps: []plan.Step{
		{ID: "safety", Kind: plan.KindSafety, Safety: &plan.Safety{OperatorRelease: "release-gpu-operator",
			OperatorValues: map[string]any{"operator": map[string]any{"tolerations": []any{"x"}}}}},
		{ID: "release-gpu-operator", Kind: plan.KindRelease, Release: &plan.Release{Name: "gpu-operator", Values: opValues,
			Layers: []plan.Layer{{Source: "detected: …", Values: opValues}}}},
		{ID: "wait-toleration", Kind: plan.KindWaitToleration},
		{ID: "taint", Kind: plan.KindTaint, Taint: &plan.Taint{Key: plan.TaintKey, Value: plan.TaintValue, Effect: plan.TaintEffect, Forced: forced,
			Toleration: plan.TolerationPolicy}},
	}}
}

func TestRetaint(t *testing.T) {
	nfdGPU := func(name string) *corev1.Node {
		return node(name, map[string]string{"feature.node.kubernetes.io/pci-10de.present": "true", "pool": "gpu"})
	}
	cp := node("cp-1", map[string]string{"node-role.kubernetes.io/control-plane": ""},
		corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule})
	pinned := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "pinned"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": "gpu"}}}}}
	tests := []struct {
		name      string
		forced    bool
		objs      []runtime.Object
		wantTaint bool
		wantErr   string
	}{
		{name: "kubeadm with GPU workers only, found by NFD: no taint, no policy", objs: []runtime.Object{cp, nfdGPU("gpu-1"), nfdGPU("gpu-2")}},
		{name: "with a CPU worker the taint stays", objs: []runtime.Object{cp, nfdGPU("gpu-1"), nfdGPU("gpu-2"), node("cpu-1", nil)}, wantTaint: true},
		{name: "--taint keeps it where every node is a GPU node", forced: true, objs: []runtime.Object{cp, nfdGPU("gpu-1"), nfdGPU("gpu-2")}, wantTaint: true},
		{name: "a Deployment pinned to GPU nodes would be stranded: the run stops before the taint", wantTaint: true,
			objs: []runtime.Object{cp, nfdGPU("gpu-1"), nfdGPU("gpu-2"), node("cpu-1", nil), pinned}, wantErr: "Deployment web/pinned"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.objs...)
			disc := cs.Discovery().(*fakediscovery.FakeDiscovery)
			disc.Resources = append(disc.Resources, &metav1.APIResourceList{GroupVersion: "admissionregistration.k8s.io/v1",
				APIResources: []metav1.APIResource{{Name: "mutatingadmissionpolicies"}}})
			p := taintPlan(tc.forced)
			x := &executor{clients: &kube.Clients{Kube: cs, Discovery: disc, Namespace: "gpu-operator"}, plan: p,
				sink: event.SinkFunc(func(event.Event) {}), gpuNodes: []string{"gpu-1", "gpu-2"}}
			_, err := safetyKind{}.Do(context.Background(), x, p.Step("safety"), nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want it to name %s", err, tc.wantErr)
				}
				var se *runner.StepError
				if !errors.As(err, &se) || !strings.Contains(se.Hint, "--no-taint") {
					t.Errorf("hint of %v names no way out", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ts, w := p.Step("taint"), p.Step("wait-toleration")
			if (ts.Skip == "") != tc.wantTaint || (w.Skip == "") != tc.wantTaint {
				t.Errorf("taint skip %q, wait skip %q; want taint %v", ts.Skip, w.Skip, tc.wantTaint)
			}
			_, policy := p.Step("release-gpu-operator").Release.Values[plan.PolicyValue]
			if policy != tc.wantTaint {
				t.Errorf("operator values %v: policy %v, want %v", p.Step("release-gpu-operator").Release.Values, policy, tc.wantTaint)
			}
		})
	}
}

func TestWaitToleration(t *testing.T) {
	cs := fake.NewClientset()
	var probes []*corev1.Pod
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).DeepCopy()
		probes = append(probes, p)
		// gpuctl's policy leaves pods with the probe label alone, and is in force from the second request.
		if _, probe := p.Labels[detect.ProbeLabel]; !probe && len(probes) > 1 {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
		}
		return true, p, nil
	})
	x := &executor{clients: &kube.Clients{Kube: cs}, plan: &plan.Plan{}}
	out, err := x.waitToleration(context.Background(), func(health.Progress) {})
	if err != nil {
		t.Fatal(err)
	}
	if len(probes) != 2 || !strings.Contains(out.Message, "get the toleration") {
		t.Errorf("%d probes, outcome %+v", len(probes), out)
	}
	for _, p := range probes {
		if _, has := p.Labels[detect.ProbeLabel]; has {
			t.Error("the wait's probe carries the label gpuctl's policy skips")
		}
	}
}
