package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/distro"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/runner"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// TaintNodes is `gpuctl taint`: it plans nvidia.com/gpu=present:NoSchedule on the GPU nodes detection
// finds (plan.TaintNodesPlan), judged by install's rules (plan.DecideTaint), and then writes exactly
// that plan, recording what it adds so UntaintNodes removes exactly that. It runs under gpuctl's
// install lock, as install does (a dry run takes none and writes nothing).
type TaintNodes struct {
	Clients *kube.Clients
	DryRun  bool
	// Force taints even where that strands workloads running today (without it: *StrandedError).
	Force bool
	// WaitForLock is how long to wait for another run's install lock (0: fail at once with lock.ErrLocked).
	WaitForLock time.Duration
	// Sink receives the lock's warnings and the run's step (nil: discarded).
	Sink event.Sink
	// OnNode reports each node's outcome as it is written.
	OnNode func(taint.NodeResult)
}

// TaintResult is what `gpuctl taint` or `gpuctl untaint` planned and did. A dry run's Plan lists what
// the run would do; a run's Done lists what it did, in the plan's shape: equal to Plan.Changes when
// every write landed.
type TaintResult struct {
	Plan   *plan.NodePlan `json:"plan"`
	DryRun bool           `json:"dryRun,omitempty"`
	// Done are the planned changes the run made.
	Done []plan.NodeChange `json:"done,omitempty"`
	// NotDone are the planned changes it did not make, with why: the node changed since the plan so
	// that the change no longer holds (nothing written), or the write failed.
	NotDone []plan.NodeUnchanged `json:"notDone,omitempty"`
	// Steps are the run's steps with their outcomes (none in a dry run).
	Steps []runner.StepResult `json:"steps,omitempty"`
	// Interrupted says how far an interrupted run got (nil when it was not interrupted).
	Interrupted *runner.InterruptedError `json:"interrupted,omitempty"`
}

// interrupted is the run's error, an interrupt before the first write made one (interrupted), and
// keeps an interrupt in the result (res may be nil: interrupted before the plan).
func (res *TaintResult) interrupted(ctx context.Context, err error) error {
	err = interrupted(ctx, err)
	if ie := (*runner.InterruptedError)(nil); res != nil && errors.As(err, &ie) {
		res.Interrupted = ie
	}
	return err
}

// StrandedError refuses `gpuctl taint` before its first write: the taint would strand these workloads
// running today, as install's taint-safety check judges them. It is a failed preflight (exit 5).
type StrandedError struct {
	Workloads []plan.TaintWorkload
}

func (e *StrandedError) Error() string {
	return plan.StrandedMessage(e.Workloads) + "; " + plan.TaintStrandedHint
}

// Unwrap makes the refusal a failed preflight: nothing was changed.
func (e *StrandedError) Unwrap() error { return preflight.ErrFailed }

// noPolicy is why `gpuctl taint` cannot count on gpuctl's MutatingAdmissionPolicy when it is not in force.
const noPolicy = "gpuctl's MutatingAdmissionPolicy is not in force (gpuctl install adds it with the operator where the cluster serves MutatingAdmissionPolicy)"

// Run plans, refuses what install would refuse, and (without DryRun) writes the plan. An interrupt
// ends it with a *runner.InterruptedError that says how many planned nodes carry the taint.
func (t *TaintNodes) Run(ctx context.Context) (res *TaintResult, err error) {
	// Under the lock, detection runs first: the nodes it finds are the ones no other run is changing.
	err = lockedUnlessDry(ctx, t.DryRun, t.Clients, t.WaitForLock, t.Sink, func(ctx context.Context) error {
		p, nodes, err := t.plan(ctx)
		if p == nil {
			return err
		}
		res = &TaintResult{Plan: p, DryRun: t.DryRun}
		if err != nil {
			return err
		}
		if s := p.Stranded(); len(s) > 0 && !t.Force {
			return &StrandedError{Workloads: s}
		}
		return carryOut(ctx, t.Clients, res, nodes, t.Sink, t.OnNode)
	})
	return res, res.interrupted(ctx, err)
}

// plan detects the cluster and decides, with install's rules, what taint does.
func (t *TaintNodes) plan(ctx context.Context) (*plan.NodePlan, []corev1.Node, error) {
	snap, err := detect.Gather(ctx, detect.From(t.Clients))
	if err != nil {
		return nil, nil, &detect.Error{Err: err}
	}
	det := detect.Analyze(snap)
	own := []string{t.Clients.Namespace}
	if rec, err := record.Read(ctx, t.Clients.Kube); err == nil && rec != nil && rec.Namespace != "" {
		own = append(own, rec.Namespace)
	}
	if distro.Get(det.Distribution.Name).OLM {
		own = append(own, plan.OpenShiftNFDNS, plan.OpenShiftOperatorNS)
	}
	// The user asked for the taint: install's --taint. What install would not do by default becomes
	// the plan's warning; what it would strand is refused in Run.
	d := plan.DecideTaint(&det, plan.TaintOptions{Force: true, PolicyAvailable: policyInForce(ctx, t.Clients, det.Admission), Own: own, NoPolicy: noPolicy})
	var gpus []string
	for _, n := range det.GPUNodes {
		gpus = append(gpus, n.Name)
	}
	p := plan.TaintNodesPlan(snap.Nodes, gpus, taint.GPUTaint, d, t.Force)
	if len(gpus) == 0 {
		return p, nil, errors.New("no GPU nodes found (no nvidia.com/gpu capacity, NFD PCI label or cloud accelerator label): nothing to taint")
	}
	return p, snap.Nodes, nil
}

// policyInForce reports whether gpuctl's MutatingAdmissionPolicy (installed with the operator) adds the
// GPU toleration now: where the API server does not add it itself but serves MutatingAdmissionPolicy,
// a dry-run pod without the probe label (which the policy skips) comes back tolerating the taint. gpuctl
// taint installs no policy, so only one in force counts; a probe that fails counts as none.
func policyInForce(ctx context.Context, c *kube.Clients, a detect.Admission) bool {
	if a.GPUToleration != nil && a.GPUToleration.Detected || a.MutatingAdmissionPolicy == nil || !a.MutatingAdmissionPolicy.Detected {
		return false
	}
	added, err := detect.ProbeGPUToleration(ctx, c.Kube, func(p *corev1.Pod) { delete(p.Labels, detect.ProbeLabel) })
	return err == nil && added
}

// UntaintNodes is `gpuctl untaint`: it plans the removal of the taints gpuctl recorded, and only those,
// on every node that records any (plan.UntaintNodesPlan), and writes exactly that plan, under gpuctl's
// install lock (a dry run takes none and writes nothing).
type UntaintNodes struct {
	Clients     *kube.Clients
	DryRun      bool
	WaitForLock time.Duration
	Sink        event.Sink
	OnNode      func(taint.NodeResult)
}

// Run plans and (without DryRun) writes the plan. An interrupt ends it with a
// *runner.InterruptedError that says how many planned nodes no longer carry gpuctl's taint.
func (u *UntaintNodes) Run(ctx context.Context) (res *TaintResult, err error) {
	err = lockedUnlessDry(ctx, u.DryRun, u.Clients, u.WaitForLock, u.Sink, func(ctx context.Context) error {
		list, err := kube.ListNodes(ctx, u.Clients.Kube, taint.Trim)
		if err != nil {
			return fmt.Errorf("untaint nodes: %w", err)
		}
		nodes := make([]corev1.Node, len(list))
		for i, n := range list {
			nodes[i] = *n
		}
		res = &TaintResult{Plan: plan.UntaintNodesPlan(nodes), DryRun: u.DryRun}
		return carryOut(ctx, u.Clients, res, nodes, u.Sink, u.OnNode)
	})
	return res, res.interrupted(ctx, err)
}

// lockedUnlessDry runs run under gpuctl's install lock, or, for a dry run (which writes nothing, not
// even the lock's Lease), without it.
func lockedUnlessDry(ctx context.Context, dryRun bool, c *kube.Clients, wait time.Duration, sink event.Sink, run func(context.Context) error) error {
	if dryRun {
		return run(ctx)
	}
	return runner.Locked(ctx, c, wait, sink, func(ctx context.Context, _ *runner.Lock) error { return run(ctx) })
}
