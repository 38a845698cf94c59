package step

import (
	"context"
	"fmt"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// Kind is everything gpuctl asks of one kind of install step. Each kind is one type in one file
// (kind_*.go); For is the one place a plan.Kind is looked up. The run and the dry run come from the
// same type, and mostly from the same code, so they cannot drift apart.
type Kind interface {
	// Do carries the step out.
	Do(ctx context.Context, x *executor, s *plan.Step, progress func(health.Progress)) (runner.Outcome, error)
	// Writes adds what Do would write to the dry run's list, each write decided as Do decides it,
	// against the cluster as it is now (server-side dry runs, Helm's own rule).
	Writes(ctx context.Context, l *lister, s *plan.Step) error
	// State reads back what an interrupted Do left in the cluster ("" when it only reads or waits).
	State(ctx context.Context, x *executor, s *plan.Step) (string, error)
	// Explained: a failed Do is a wait on the GPU stack, which the operator's own diagnosis explains.
	Explained() bool
	// Needs are the reads and writes Do makes beyond the objects it applies (those are read from the
	// render), for the permission check.
	Needs(s *plan.Step, namespace string) []preflight.Access
	// Recorded is what the install record names of the step's writes outside Helm releases.
	Recorded(s *plan.Step) (Recorded, error)
	// Rendered is what a render of the plan holds of the step (template, check --pre).
	Rendered(s *plan.Step) Rendered
	// Exported is what a GitOps export holds of the step; it is asked of skipped steps too (a skipped
	// taint is worth a note).
	Exported(s *plan.Step) Exported
}

// For is the kind of a step: the one lookup of a plan.Kind.
func For(stepKind plan.Kind) (Kind, error) {
	switch stepKind {
	case plan.KindObjects:
		return objectsKind{}, nil
	case plan.KindSecrets:
		return secretsKind{}, nil
	case plan.KindCRDs:
		return crdsKind{}, nil
	case plan.KindRelease:
		return releaseKind{}, nil
	case plan.KindPSP:
		return pspKind{}, nil
	case plan.KindSafety:
		return safetyKind{}, nil
	case plan.KindTaint:
		return taintKind{}, nil
	case plan.KindNodeLabels:
		return nodeLabelsKind{}, nil
	case plan.KindMIGAfterGFD:
		return migAfterGFDKind{}, nil
	case plan.KindApprove:
		return approveKind{}, nil
	case plan.KindClusterPolicy:
		return clusterPolicyKind{}, nil
	case plan.KindWaitNFD:
		return waitNFD(), nil
	case plan.KindWaitToleration:
		return waitToleration(), nil
	case plan.KindWaitCSV:
		return waitCSV(), nil
	case plan.KindWaitOperator:
		return waitOperator(), nil
	case plan.KindWaitValidators:
		return waitValidators(), nil
	case plan.KindWaitAllocatable:
		return waitAllocatable(), nil
	case plan.KindWaitPolicy:
		return waitPolicy(), nil
	case plan.KindWaitGPUCluster:
		return waitGPUCluster(), nil
	case plan.KindWaitResourceSlices:
		return waitResourceSlices(), nil
	}
	return nil, fmt.Errorf("unknown step kind %q", stepKind)
}

// Recorded is what the install record names of a step's writes outside Helm releases.
type Recorded struct {
	// CRDs and Namespaces by name; Objects by what they are (Created and UID are set by the record).
	CRDs       []string
	Namespaces []string
	Objects    []record.Object
}

// Rendered is what a render of the plan holds of a step.
type Rendered struct {
	// Objects are applied as they are.
	Objects []map[string]any
	// Release is rendered by Helm, with its chart's CRDs.
	Release *plan.Release
}

// Exported is what a GitOps export holds of a step.
type Exported struct {
	// Objects are written as they are applied, each with its comments.
	Objects []ExportedObject
	// Notes say what the export leaves to the user (a GitOps engine does not change nodes).
	Notes []string
	// CRDs: the CRDs of the step's charts go into the export (as each engine takes them).
	CRDs bool
	// Release becomes the engine's release object (a HelmRelease, an Application, a HelmChart).
	Release *plan.Release
}

// ExportedObject is one object of an export, with the comments that say why it is there.
type ExportedObject struct {
	Object  map[string]any
	Comment []string
}

// waiting is a kind that only reads and waits: it writes nothing, leaves nothing behind when
// interrupted, and is in no render, record or export.
type waiting struct {
	do func(ctx context.Context, x *executor, s *plan.Step, progress func(health.Progress)) (runner.Outcome, error)
	// explained: a failed wait on the GPU stack is explained by the operator's diagnosis.
	explained bool
	// needs are the wait's reads (lists and watches).
	needs func(s *plan.Step, namespace string) []preflight.Access
}

func (w waiting) Do(ctx context.Context, x *executor, s *plan.Step, progress func(health.Progress)) (runner.Outcome, error) {
	return w.do(ctx, x, s, progress)
}
func (waiting) Writes(context.Context, *lister, *plan.Step) error { return nil }
func (waiting) State(context.Context, *executor, *plan.Step) (string, error) {
	return "", nil
}
func (w waiting) Explained() bool { return w.explained }
func (w waiting) Needs(s *plan.Step, namespace string) []preflight.Access {
	if w.needs == nil {
		return nil
	}
	return w.needs(s, namespace)
}
func (waiting) Recorded(*plan.Step) (Recorded, error) { return Recorded{}, nil }
func (waiting) Rendered(*plan.Step) Rendered          { return Rendered{} }
func (waiting) Exported(*plan.Step) Exported          { return Exported{} }

// access is a list of permissions: verbs on one resource of one API group in one namespace ("" for
// cluster-scoped resources and every namespace).
func access(namespace, group, resource string, verbs ...string) []preflight.Access {
	out := make([]preflight.Access, 0, len(verbs))
	for _, v := range verbs {
		out = append(out, preflight.Access{Namespace: namespace, Group: group, Resource: resource, Verb: v})
	}
	return out
}

// Needs are the reads and writes p's steps make beyond the objects they apply, for the permission
// check (preflight.Env.StepNeeds); skipped steps make none.
func Needs(p *plan.Plan) ([]preflight.Access, error) {
	steps, err := running(p)
	if err != nil {
		return nil, err
	}
	var out []preflight.Access
	for _, sk := range steps {
		out = append(out, sk.k.Needs(sk.s, p.Namespace)...)
	}
	return out, nil
}

// stepKind is a step of a plan with its kind.
type stepKind struct {
	s *plan.Step
	k Kind
}

// running are the steps of p that run (not skipped), each with its kind, in the plan's order. A step
// of a kind For does not know is an error.
func running(p *plan.Plan) ([]stepKind, error) {
	var out []stepKind
	for i := range p.Steps {
		s := &p.Steps[i]
		if s.Skip != "" {
			continue
		}
		k, err := For(s.Kind)
		if err != nil {
			return nil, fmt.Errorf("step %s: %w", s.ID, err)
		}
		out = append(out, stepKind{s, k})
	}
	return out, nil
}
