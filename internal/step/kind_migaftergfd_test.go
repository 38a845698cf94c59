package step

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// TestMIGAfterGFD: the step decides from GPU Feature Discovery's labels once every GPU node has them,
// labels the nodes whose GPUs take the config, and refuses (an input mistake) a request no GPU takes.
func TestMIGAfterGFD(t *testing.T) {
	gfd := func(name, product, capable string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			plan.GPUProductLabel: product, plan.MIGCapableLabel: capable}}}
	}
	for _, tc := range []struct {
		name     string
		nodes    []runtime.Object
		labels   *plan.NodeLabels
		want     map[string]string
		wantErr  string
		wantWarn string
	}{
		{"a strategy alone on T4s stops the run, naming the nodes and their GPU",
			[]runtime.Object{gfd("k3s-gpu-1", "Tesla-T4", "false"), gfd("k3s-gpu-2", "Tesla-T4", "false")},
			&plan.NodeLabels{Key: plan.MIGLabel}, nil, "k3s-gpu-1 (Tesla-T4), k3s-gpu-2 (Tesla-T4)", ""},
		{"a config for every GPU node goes on the A100 and not on the T4",
			[]runtime.Object{gfd("n-1", "Tesla-T4", "false"), gfd("n-2", "NVIDIA-A100-SXM4-40GB", "true")},
			&plan.NodeLabels{Key: plan.MIGLabel, Pools: map[string]string{plan.MIGEveryGPUNode: "all-1g.5gb"}},
			map[string]string{"n-2": "all-1g.5gb"}, "", "n-1 (Tesla-T4)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := fake.NewClientset(tc.nodes...)
			var warnings []string
			x := &executor{clients: &kube.Clients{Kube: kc}, plan: &plan.Plan{Namespace: "gpu-operator"},
				gpuNodes: nil,
				sink: event.SinkFunc(func(e event.Event) {
					if e.Type == event.Warning {
						warnings = append(warnings, e.Message)
					}
				})}
			for _, n := range tc.nodes {
				x.gpuNodes = append(x.gpuNodes, n.(*corev1.Node).Name)
			}
			s := &plan.Step{ID: plan.MIGStepID, Kind: plan.KindMIGAfterGFD, Labels: tc.labels}
			_, err := x.migAfterGFD(context.Background(), s, nil)
			if tc.wantErr != "" {
				if !errors.Is(err, plan.ErrInput) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want an input mistake naming %q", err, tc.wantErr)
				}
				list, _ := kc.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
				for _, n := range list.Items {
					if _, ok := n.Labels[plan.MIGLabel]; ok {
						t.Errorf("node %s labelled after the refusal", n.Name)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				n, _ := kc.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
				if n.Labels[plan.MIGLabel] != want {
					t.Errorf("node %s: %s=%q, want %q", name, plan.MIGLabel, n.Labels[plan.MIGLabel], want)
				}
			}
			if len(s.Labels.Nodes) != len(tc.want) {
				t.Errorf("the plan's step shows %v, want what was decided %v", s.Labels.Nodes, tc.want)
			}
			if tc.wantWarn != "" && !strings.Contains(strings.Join(warnings, "\n"), tc.wantWarn) {
				t.Errorf("warnings %v, want one naming %q", warnings, tc.wantWarn)
			}
		})
	}
}
