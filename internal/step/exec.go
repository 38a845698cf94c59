package step

import (
	"context"
	"strings"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// executor carries out the steps of an install Plan, one handler per step kind.
type executor struct {
	clients *kube.Clients
	plan    *plan.Plan
	sink    event.Sink
	// gpuNodes starts as the plan's and is replaced by what NFD labels.
	gpuNodes []string
	// extraValues are merged over a release step's values at run time (tolerations the safety check adds).
	extraValues map[string]map[string]any
	// secrets are the Secret objects of KindSecrets steps, read before the run (their contents never
	// reach an event).
	secrets []map[string]any
	// releases are the Helm clients, by namespace.
	releases *release.Clients
	// labelsBefore are the nodes' stack labels before gpuctl's first install (the record's), which a
	// label gpuctl no longer wants goes back to.
	labelsBefore map[string]record.NodeMetadata
	// runID is this run's install Lease holder identity: release steps label what they write with it,
	// and recover only pending revisions another run wrote (internal/release Apply.RunID).
	runID string
}

// steps are the Plan's steps as the runner carries them out: each kind's Do, what an interrupted one
// left behind, and the operator's own diagnosis of a failed wait on the stack.
func (x *executor) steps() []runner.Step {
	out := make([]runner.Step, len(x.plan.Steps))
	for i := range x.plan.Steps {
		s := &x.plan.Steps[i]
		k, err := For(s.Kind)
		// The plan's step, not a copy: an earlier step may skip a later one at run time (retaint).
		out[i] = runner.Step{ID: s.ID, Title: s.Title, Skipped: func() string { return s.Skip },
			Do: func(ctx context.Context, progress func(health.Progress)) (runner.Outcome, error) {
				if err != nil {
					return runner.Outcome{}, err
				}
				return k.Do(ctx, x, s, progress)
			},
			State: func(ctx context.Context) (string, error) {
				if err != nil {
					return "", nil
				}
				return k.State(ctx, x, s)
			},
		}
		if err == nil && k.Explained() {
			out[i].Explain = x.explain
		}
	}
	return out
}

// explain adds what only the operator knows to the event of a failed wait on the GPU stack.
func (x *executor) explain(ctx context.Context, ev *event.Event) {
	detail, hint := x.operatorDiagnosis(ctx)
	if ev.Detail != "" {
		ev.Detail = strings.TrimRight(ev.Detail, "\n") + "\n"
	}
	ev.Detail = strings.TrimRight(ev.Detail+detail, "\n")
	if hint != "" {
		ev.Hint = hint
	}
}

func (x *executor) waiter(progress func(health.Progress)) *health.Waiter {
	return &health.Waiter{Kube: x.clients.Kube, Dynamic: x.clients.Dynamic, OnProgress: progress, Namespace: x.plan.Namespace}
}

// releaseClient is the Helm client of a namespace (releases are stored where they are installed; ""
// is the plan's namespace).
func (x *executor) releaseClient(ns string) (*release.Client, error) {
	if ns == "" {
		ns = x.plan.Namespace
	}
	return x.releases.In(ns)
}
