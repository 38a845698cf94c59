package engine

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// sinkFunc is an event.Sink from a function.
type sinkFunc func(event.Event)

func (f sinkFunc) Event(e event.Event) { f(e) }

func TestTaintedUnlistedNamesOnlyNodesTheRunTaintedByRule(t *testing.T) {
	ctx := context.Background()
	gpuTainted := func(name string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		ch, err := taint.PlanTaint(n, taint.GPUTaint)
		if err != nil {
			t.Fatal(err)
		}
		n.Spec.Taints = append(n.Spec.Taints, ch.Add...)
		n.Annotations = map[string]string{taint.AddedTaintsAnnotation: `[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}]`}
		return n
	}
	kc := fake.NewClientset(gpuTainted("listed"), gpuTainted("earlier"), gpuTainted("found-by-nfd"),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu"}})
	p := &plan.Plan{Steps: []plan.Step{{ID: "taint", Kind: plan.KindTaint, Taint: &plan.Taint{Key: plan.TaintKey, Value: plan.TaintValue, Effect: plan.TaintEffect, Nodes: []string{"listed"}}}}}
	var warnings []string
	got := taintedUnlisted(ctx, kc, p, map[string]bool{"earlier": true}, sinkFunc(func(e event.Event) {
		if e.Type == event.Warning {
			warnings = append(warnings, e.Message)
		}
	}))
	if !slices.Equal(got, []string{"found-by-nfd"}) {
		t.Errorf("tainted beyond the plan: %v, want [found-by-nfd]", got)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "found-by-nfd") || !strings.Contains(warnings[0], "NFD labelled it") {
		t.Errorf("warnings %q", warnings)
	}
	p.Steps[0].Skip = "--no-taint"
	if got := taintedUnlisted(ctx, kc, p, nil, sinkFunc(func(event.Event) {})); got != nil {
		t.Errorf("a skipped taint step reports %v", got)
	}
}
