package runner

import (
	"context"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
)

func node(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

func safetyPlan(opValues map[string]any, planned bool) *plan.Plan {
	return &plan.Plan{Namespace: "gpu-operator", Steps: []plan.Step{
		{ID: "safety", Kind: plan.KindSafety, Safety: &plan.Safety{
			TolerationsPlanned: planned, OperatorRelease: "release-gpu-operator",
			OperatorValues: map[string]any{"operator": map[string]any{"tolerations": []any{"x"}}},
		}},
		{ID: "release-gpu-operator", Kind: plan.KindRelease, Release: &plan.Release{Name: "gpu-operator", Values: opValues,
			Layers: []plan.Layer{{Source: "profile kubeadm", Values: opValues}, {Source: "--set", Values: map[string]any{"driver": map[string]any{"enabled": false}}}}}},
	}}
}

func runSafety(t *testing.T, p *plan.Plan, objs ...runtime.Object) (*executor, []event.Event, error) {
	t.Helper()
	var events []event.Event
	x := &executor{
		clients:  &kube.Clients{Kube: fake.NewClientset(objs...)},
		plan:     p,
		sink:     event.SinkFunc(func(e event.Event) { events = append(events, e) }),
		gpuNodes: []string{"gpu-1"},
	}
	_, err := x.safety(context.Background(), p.Step("safety"))
	return x, events, err
}

func TestSafety(t *testing.T) {
	gpu := node("gpu-1", map[string]string{"gpu": "yes"})
	cpu := node("cpu-1", nil)
	cp := node("cp-1", map[string]string{"node-role.kubernetes.io/control-plane": ""},
		corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule})

	t.Run("with a CPU worker left, no tolerations are added", func(t *testing.T) {
		x, _, err := runSafety(t, safetyPlan(nil, false), gpu, cpu, cp)
		if err != nil {
			t.Fatal(err)
		}
		if r := x.plan.Step("release-gpu-operator").Release; len(r.Layers) != 2 {
			t.Errorf("layers %+v, want none added", r.Layers)
		}
	})

	t.Run("when NFD shows every worker is a GPU node, the operator gets the toleration at run time, below --set", func(t *testing.T) {
		x, _, err := runSafety(t, safetyPlan(nil, false), gpu, cp)
		if err != nil {
			t.Fatal(err)
		}
		r := x.plan.Step("release-gpu-operator").Release
		if len(r.Layers) != 3 || r.Layers[2].Source != "--set" || !strings.Contains(r.Layers[1].Source, "safety check") {
			t.Fatalf("layers %+v, want the safety check's between the profile and --set", r.Layers)
		}
		want := map[string]any{"operator": map[string]any{"tolerations": []any{"x"}}, "driver": map[string]any{"enabled": false}}
		if !reflect.DeepEqual(r.Values, want) {
			t.Errorf("values %v, want %v", r.Values, want)
		}
	})

	t.Run("a daemonsets.tolerations override without the GPU toleration stops the run", func(t *testing.T) {
		vals := map[string]any{"daemonsets": map[string]any{"tolerations": []any{map[string]any{"key": "sku", "operator": "Exists"}}}}
		_, _, err := runSafety(t, safetyPlan(vals, false), gpu, cpu)
		if err == nil || !strings.Contains(err.Error(), "would not tolerate") {
			t.Fatalf("err %v", err)
		}
	})

	t.Run("an override that keeps the GPU toleration passes", func(t *testing.T) {
		vals := map[string]any{"daemonsets": map[string]any{"tolerations": []any{map[string]any{"operator": "Exists"}}}}
		if _, _, err := runSafety(t, safetyPlan(vals, false), gpu, cpu); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("other DaemonSets that reach GPU nodes without tolerating the taint are reported", func(t *testing.T) {
		ds := func(name string, sel map[string]string, tols ...corev1.Toleration) *appsv1.DaemonSet {
			return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "logging"},
				Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeSelector: sel, Tolerations: tols}}}}
		}
		_, events, err := runSafety(t, safetyPlan(nil, false), gpu, cpu,
			ds("fluent-bit", nil),
			ds("cpu-only", map[string]string{"gpu": "no"}),
			ds("tolerant", nil, corev1.Toleration{Operator: corev1.TolerationOpExists}))
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != 1 || !strings.Contains(events[0].Message, "logging/fluent-bit") || strings.Contains(events[0].Message, "cpu-only") || strings.Contains(events[0].Message, "tolerant") {
			t.Errorf("events %+v", events)
		}
	})

	t.Run("a GPU node with a taint the operands do not tolerate stops the run before the taint, naming it", func(t *testing.T) {
		reserved := node("gpu-1", map[string]string{"gpu": "yes"}, corev1.Taint{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule})
		_, _, err := runSafety(t, safetyPlan(nil, false), reserved, cpu)
		if err == nil || !strings.Contains(err.Error(), "GPU node gpu-1 has taint dedicated=ml:NoSchedule") {
			t.Fatalf("err %v", err)
		}
		tolerating := map[string]any{"daemonsets": map[string]any{"tolerations": []any{
			map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
			map[string]any{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
		}}}
		if _, _, err := runSafety(t, safetyPlan(tolerating, false), reserved, cpu); err != nil {
			t.Errorf("with a toleration for it: %v", err)
		}
	})
}
