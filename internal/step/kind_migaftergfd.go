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
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// migAfterGFDKind decides --mig once GPU Feature Discovery has said which GPUs can do MIG, and labels
// the nodes it decides for as nodeLabelsKind does.
type migAfterGFDKind struct{}

func (migAfterGFDKind) Do(ctx context.Context, x *executor, s *plan.Step, progress func(health.Progress)) (runner.Outcome, error) {
	return x.migAfterGFD(ctx, s, progress)
}

// Writes: a rule, as the nodes are decided from GPU Feature Discovery's labels at run time.
func (migAfterGFDKind) Writes(_ context.Context, l *lister, s *plan.Step) error {
	if s.Labels != nil {
		l.w.Rules = append(l.w.Rules, "once GPU Feature Discovery has labelled the GPU nodes ("+plan.MIGCapableLabel+"), labels "+s.Labels.Key+" on the nodes of step "+s.ID+
			" whose GPUs take their config; if no GPU can, the run stops there with exit 2 (the operator release is installed by then, and no node is labelled)")
	}
	return nil
}

func (migAfterGFDKind) State(ctx context.Context, x *executor, s *plan.Step) (string, error) {
	return x.labelsState(ctx, s.Labels)
}

func (migAfterGFDKind) Explained() bool { return false }

// Needs: the nodes are watched for GPU Feature Discovery's labels, then patched.
func (migAfterGFDKind) Needs(*plan.Step, string) []preflight.Access {
	return access("", "", "nodes", "get", "list", "watch", "patch")
}

func (migAfterGFDKind) Recorded(*plan.Step) (Recorded, error) { return Recorded{}, nil }
func (migAfterGFDKind) Rendered(*plan.Step) Rendered          { return Rendered{} }
func (migAfterGFDKind) Exported(s *plan.Step) Exported        { return nodeLabelsKind{}.Exported(s) }

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
