package step

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
	_, err := safetyKind{}.Do(context.Background(), x, p.Step("safety"), nil)
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

func TestSortNodes(t *testing.T) {
	cordoned := node("cpu-cordoned", nil)
	cordoned.Spec.Unschedulable = true
	cordonedGPU := node("gpu-cordoned", nil)
	cordonedGPU.Spec.Unschedulable = true
	for _, tc := range []struct {
		name     string
		nodes    []*corev1.Node
		wantGPU  []string
		wantOpen []string
	}{
		{"a plain CPU worker is open", []*corev1.Node{node("gpu-1", nil), node("cpu-1", nil)}, []string{"gpu-1"}, []string{"cpu-1"}},
		{"a cordoned worker is not open", []*corev1.Node{node("gpu-1", nil), cordoned}, []string{"gpu-1"}, nil},
		{"a control-plane node is not open, by either role label", []*corev1.Node{
			node("cp-1", map[string]string{"node-role.kubernetes.io/control-plane": ""}),
			node("master-1", map[string]string{"node-role.kubernetes.io/master": ""}),
		}, nil, nil},
		{"a worker with a NoSchedule or NoExecute taint of its own is not open", []*corev1.Node{
			node("reserved", nil, corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}),
			node("draining", nil, corev1.Taint{Key: "drain", Effect: corev1.TaintEffectNoExecute}),
		}, nil, nil},
		{"a PreferNoSchedule taint leaves a worker open", []*corev1.Node{
			node("soft", nil, corev1.Taint{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}),
		}, nil, []string{"soft"}},
		{"a GPU node is a GPU node even when cordoned", []*corev1.Node{cordonedGPU}, []string{"gpu-cordoned"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gpu, open := sortNodes(tc.nodes, []string{"gpu-1", "gpu-cordoned"})
			var gpuNames []string
			for _, n := range gpu {
				gpuNames = append(gpuNames, n.Name)
			}
			if !reflect.DeepEqual(gpuNames, tc.wantGPU) || !reflect.DeepEqual(open, tc.wantOpen) {
				t.Errorf("GPU nodes %v, open %v; want %v, %v", gpuNames, open, tc.wantGPU, tc.wantOpen)
			}
		})
	}
}

func TestOverridesTolerate(t *testing.T) {
	without := []any{map[string]any{"key": "sku", "operator": "Exists"}}
	with := []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}}
	for _, tc := range []struct {
		name      string
		operator  map[string]any
		nfd       map[string]any
		wantError string
	}{
		{"the charts' own tolerations pass", nil, nil, ""},
		{"an operator override with the GPU toleration passes", map[string]any{"daemonsets": map[string]any{"tolerations": with}}, nil, ""},
		{"an operator override without it fails, naming daemonsets.tolerations", map[string]any{"daemonsets": map[string]any{"tolerations": without}}, nil, "daemonsets.tolerations"},
		{"an NFD worker override without it fails, naming the worker's tolerations", nil, map[string]any{"worker": map[string]any{"tolerations": without}}, "node-feature-discovery.worker.tolerations"},
		{"an NFD worker override with it passes", nil, map[string]any{"worker": map[string]any{"tolerations": with}}, ""},
		{"tolerations that are not a list fail", map[string]any{"daemonsets": map[string]any{"tolerations": "all"}}, nil, "values daemonsets.tolerations"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &plan.Plan{Steps: []plan.Step{
				{ID: "safety", Kind: plan.KindSafety, Safety: &plan.Safety{OperatorRelease: "release-gpu-operator", NFDRelease: "release-nfd"}},
				{ID: "release-gpu-operator", Kind: plan.KindRelease, Release: &plan.Release{Name: "gpu-operator", Values: tc.operator}},
				{ID: "release-nfd", Kind: plan.KindRelease, Release: &plan.Release{Name: "node-feature-discovery", Values: tc.nfd}},
			}}
			err := (&executor{plan: p}).overridesTolerate(p.Step("safety"))
			switch {
			case tc.wantError == "" && err != nil:
				t.Errorf("err %v, want none", err)
			case tc.wantError != "" && (err == nil || !strings.Contains(err.Error(), tc.wantError)):
				t.Errorf("err %v, want one naming %q", err, tc.wantError)
			}
		})
	}
}

func TestTolerateEverywhere(t *testing.T) {
	nfdValues := map[string]any{"master": map[string]any{"tolerations": []any{"y"}}}
	for _, tc := range []struct {
		name                  string
		planned               bool
		nfdRelease, nfdSkip   string
		wantOperator, wantNFD int // layers added
	}{
		{"tolerations the plan already has are not added again", true, "release-nfd", "", 0, 0},
		{"without an NFD release only the operator gets them", false, "", "", 1, 0},
		{"an NFD release the plan skips is not applied again", false, "release-nfd", "NFD is already running", 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &plan.Plan{Steps: []plan.Step{
				{ID: "safety", Kind: plan.KindSafety, Safety: &plan.Safety{TolerationsPlanned: tc.planned,
					OperatorRelease: "release-gpu-operator", NFDRelease: tc.nfdRelease,
					OperatorValues: map[string]any{"operator": map[string]any{"tolerations": []any{"x"}}}, NFDValues: nfdValues}},
				{ID: "release-gpu-operator", Kind: plan.KindRelease, Release: &plan.Release{Name: "gpu-operator"}},
				{ID: "release-nfd", Kind: plan.KindRelease, Skip: tc.nfdSkip, Release: &plan.Release{Name: "node-feature-discovery"}},
			}}
			changed, err := (&executor{plan: p}).tolerateEverywhere(context.Background(), p.Step("safety"))
			if err != nil || changed {
				t.Fatalf("changed %v, err %v; want no change and no error", changed, err)
			}
			if got := len(p.Step("release-gpu-operator").Release.Layers); got != tc.wantOperator {
				t.Errorf("operator release: %d layers added, want %d", got, tc.wantOperator)
			}
			if got := len(p.Step("release-nfd").Release.Layers); got != tc.wantNFD {
				t.Errorf("NFD release: %d layers added, want %d", got, tc.wantNFD)
			}
		})
	}
}
