package uninstall

import (
	"context"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// Resume is what an interrupted uninstall tells the user to do.
const Resume = "run gpuctl uninstall again: it continues where it stopped"

// Executor carries out an uninstall's Plan, step by step through runner.Runner, in the reverse order
// of install. It decides nothing the Plan did not: it looks again only where the cluster may have
// changed since the Plan was made (see the package's doc).
type Executor struct {
	Clients *kube.Clients
	// FinalizerWait is how long a deleted object may stay before the step names what holds it.
	FinalizerWait time.Duration
	Sink          event.Sink
}

// Result is what a run of the Plan did.
type Result struct {
	// Steps are the steps' outcomes, in order; Changed is true once one changed the cluster.
	Steps   []runner.StepResult
	Changed bool
	// KeptNamespaces are the namespaces gpuctl created that --purge kept, with what they hold that
	// gpuctl did not create.
	KeptNamespaces []KeptNamespace
}

// Run carries out p (made by Build). Its Result is set however the run ends.
func (x *Executor) Run(ctx context.Context, p *Plan) (*Result, error) {
	e := newExecution(x, p)
	r := &runner.Runner{Sink: x.Sink, Resume: Resume}
	err := r.Run(ctx, e.steps())
	return &Result{Steps: r.Results, Changed: r.Changed, KeptNamespaces: e.keptNamespaces}, err
}

// execution is one run of a Plan, with what the run learns as it goes.
type execution struct {
	*Executor
	p *Plan
	// releases are the Helm clients, by namespace.
	releases *release.Clients
	// owners are the UIDs of the ClusterPolicy and NVIDIADriver objects deleted, and of the
	// DaemonSets they owned when last seen: what they own must be gone before uninstall says it is
	// done. A DaemonSet stays here after it is gone, so its pods are still waited for.
	owners map[types.UID]bool
	// ours are the UIDs of gpuctl's objects in the namespaces --purge deletes: the plan's, and what
	// each later look judged gpuctl's.
	ours map[types.UID]bool
	// keptNamespaces are the namespaces gpuctl created that --purge kept: they held objects gpuctl
	// did not create.
	keptNamespaces []KeptNamespace
}

// newExecution is a run of p by x, with nothing learnt yet.
func newExecution(x *Executor, p *Plan) *execution {
	e := &execution{Executor: x, p: p, releases: release.NewClients(x.Clients.Getter), owners: map[types.UID]bool{}, ours: map[types.UID]bool{}}
	if p.Purge != nil {
		maps.Copy(e.ours, p.Purge.ours)
	}
	return e
}

// steps are the plan's parts as the runner carries them out, in the reverse order of install.
func (e *execution) steps() []runner.Step {
	steps := []runner.Step{{ID: stepDeleteCustomResources, Title: "Delete the ClusterPolicy and NVIDIADriver objects gpuctl created",
		Do: messages(func(ctx context.Context, progress func(string)) (runner.Outcome, error) {
			return e.deletePlanned(ctx, stepDeleteCustomResources, progress)
		}),
		Hint: "kubectl get clusterpolicy,nvidiadriver shows them"}}
	waitDependents := runner.Step{ID: "wait-operands", Title: "Wait until the objects they owned are gone", Do: messages(e.waitDependents),
		Hint: "kubectl -n " + e.p.namespace + " get daemonsets,pods,serviceaccounts; kubectl get clusterroles,clusterrolebindings show what is left"}
	if !slices.ContainsFunc(e.p.Releases, func(r PlannedRelease) bool { return r.Role == RoleOperator }) {
		steps = append(steps, waitDependents)
	}
	for _, r := range e.p.Releases {
		steps = append(steps, e.releaseSteps(r)...)
		if r.Role == RoleOperator {
			// After the operator has stopped: an object its last reconcile created while the
			// ClusterPolicy went is owned by it too, and goes only now.
			steps = append(steps, waitDependents)
		}
	}
	steps = append(steps,
		runner.Step{ID: "untaint", Title: "Remove the taints gpuctl added", Do: messages(e.untaint)},
		runner.Step{ID: "node-labels", Title: "Remove the node labels NFD and the operator wrote", Do: messages(e.nodeMetadata)})
	if e.p.Purge != nil {
		steps = append(steps,
			runner.Step{ID: stepPurgeObjects, Title: "Delete the other objects gpuctl created", Do: messages(e.purgeObjects)},
			runner.Step{ID: stepPurgeCRDs, Title: "Delete the CRDs gpuctl created", Do: messages(e.purgeCRDs)},
			runner.Step{ID: stepPurgeNamespaces, Title: "Delete the namespaces gpuctl created", Do: messages(e.purgeNamespaces)})
	}
	return append(steps, runner.Step{ID: "record", Title: "Install record " + record.Namespace + "/" + record.Name, Do: messages(e.updateRecord)})
}

// releaseSteps remove release r (and, for OpenShift's NFD operator, the instance gpuctl created first).
func (e *execution) releaseSteps(r PlannedRelease) []runner.Step {
	var steps []runner.Step
	if r.Name == nfdOperatorRelease {
		steps = append(steps, runner.Step{ID: stepDeleteNFDInstance, Title: "Delete the NodeFeatureDiscovery instance gpuctl created",
			Do: messages(func(ctx context.Context, progress func(string)) (runner.Outcome, error) {
				return e.deletePlanned(ctx, stepDeleteNFDInstance, progress)
			})})
	}
	return append(steps, runner.Step{ID: releaseStep(r.Name), Title: "Uninstall release " + r.Name,
		Do: messages(func(ctx context.Context, progress func(string)) (runner.Outcome, error) {
			return e.uninstallRelease(ctx, r, progress)
		}),
		Hint: "helm history " + r.Name + " -n " + r.Namespace + " shows the release's revisions"})
}

// messages adapts a handler that reports its progress as plain messages.
func messages(do func(context.Context, func(string)) (runner.Outcome, error)) func(context.Context, func(health.Progress)) (runner.Outcome, error) {
	return func(ctx context.Context, progress func(health.Progress)) (runner.Outcome, error) {
		return do(ctx, func(m string) { progress(health.Progress{Message: m}) })
	}
}
