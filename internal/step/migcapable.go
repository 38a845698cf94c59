package step

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// migAfterGFD carries out a KindMIGAfterGFD step, planned where gpuctl could not tell before the
// install whether the GPUs can do MIG: it waits until GPU Feature Discovery has labelled the nodes the
// step decides for with nvidia.com/mig.capable (the planned nodes, and every GPU node NFD found when
// the step has a config for every GPU node or a strategy alone), decides with plan.DecideMIG, and
// labels the nodes whose GPUs take their config as a KindNodeLabels step does. A MIG request no GPU
// can honour stops the run as a mistake in the inputs (plan.ErrInput: exit 2), naming each node and
// its GPU; the operator release is in by then, with MIG manager on and no node labelled.
func (x *executor) migAfterGFD(ctx context.Context, s *plan.Step, progress func(health.Progress)) (runner.Outcome, error) {
	l := s.Labels
	nodes := slices.Collect(maps.Keys(l.Nodes))
	if l.Pools[plan.MIGEveryGPUNode] != "" || len(l.Nodes) == 0 {
		nodes = append(nodes, x.gpuNodes...)
	}
	nodes = health.SortedUniqueNames(nodes)
	if err := x.waiter(progress).NodesHaveLabel(ctx, nodes, plan.MIGCapableLabel, "GPU nodes labelled "+plan.MIGCapableLabel+" by GPU Feature Discovery"); err != nil {
		return runner.Outcome{}, err
	}
	list, err := x.clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return runner.Outcome{}, fmt.Errorf("list nodes: %w", err)
	}
	var found []plan.GFDNode
	for i := range list.Items {
		if slices.Contains(nodes, list.Items[i].Name) {
			found = append(found, plan.GFDNodeOf(&list.Items[i]))
		}
	}
	decided, warnings, err := plan.DecideMIG(l, found)
	for _, w := range warnings {
		x.sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Message: w})
	}
	if err != nil {
		return runner.Outcome{}, &runner.StepError{Err: err,
			Hint: "the operator runs, with MIG manager on and no node labelled " + plan.MIGLabel + ": gpuctl upgrade --mig none takes --mig off and finishes the install " +
				"(or name the pools of MIG-capable GPUs: gpuctl upgrade --mig POOL=CONFIG)"}
	}
	l.Nodes = decided // the plan's step: the run's result shows what was decided
	return x.nodeLabels(ctx, s)
}
