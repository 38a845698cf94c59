package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// gpuctlTainted are the nodes with a taint gpuctl recorded as its own (taint.Added).
func gpuctlTainted(ctx context.Context, kc kubernetes.Interface) (map[string]bool, error) {
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	out := map[string]bool{}
	for i := range nodes.Items {
		if added, err := taint.Added(&nodes.Items[i]); err == nil && len(added) > 0 {
			out[nodes.Items[i].Name] = true
		}
	}
	return out, nil
}

// taintedUnlisted names the nodes the run tainted that the plan's taint step did not name (GPU nodes
// NFD labelled during the run, tainted by the plan's rule, plan.NodeRuleText), and warns of each: a
// dry run could not list them.
func taintedUnlisted(ctx context.Context, kc kubernetes.Interface, p *plan.Plan, before map[string]bool, sink event.Sink) []string {
	s := p.Step("taint")
	if s == nil || s.Taint == nil || s.Skip != "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	now, err := gpuctlTainted(ctx, kc)
	if err != nil {
		sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Message: "could not read back which nodes were tainted: " + err.Error()})
		return nil
	}
	var out []string
	for n := range now {
		if !before[n] && !slices.Contains(s.Taint.Nodes, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out) // map keys: unique already
	for _, n := range out {
		sink.Event(event.Event{Time: time.Now(), Type: event.Warning,
			Message: "tainted node " + n + ", which the plan did not name: NFD labelled it a GPU node during the run (the plan's rule for such nodes; --dry-run says it as nodeRule)"})
	}
	return out
}
