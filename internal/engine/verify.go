package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// Labels on verify's pods (VerifyNameLabel's value is plan.VerifyName, which also starts their names):
// a later run, or the cleanup of an interrupted one, finds them by these.
const (
	VerifyNameLabel = "app.kubernetes.io/name"
	VerifyRunLabel  = "gpuctl.io/verify-run"
	verifyNodeAnno  = "gpuctl.io/verify-node"
	managedByLabel  = "app.kubernetes.io/managed-by"
	verifyContainer = "vectoradd"
)

// ErrNoLabelledGPUNodes: no node carries nvidia.com/gpu.present=true (the operator has labelled no GPU
// node yet), so there is nothing to verify. The operator's own verdict that it found none is
// health.ErrOperatorFoundNoGPUNodes.
var ErrNoLabelledGPUNodes = errors.New("no GPU nodes")

// ErrVerifyFailed: at least one GPU node did not pass verification.
var ErrVerifyFailed = errors.New("GPU verification failed")

// ErrPodsLeft: a verify run could not delete its pods (or ResourceClaimTemplates) when it ended. The
// nodes' verdicts stand; the run fails all the same, naming how to remove what it left.
var ErrPodsLeft = errors.New("verify could not remove its pods")

// VerifyResume is what an interrupted verify tells the user to do.
const VerifyResume = "run gpuctl verify again: every run starts over, and first removes the pods an earlier one left"

// VerifyOptions are gpuctl verify's options; the zero value verifies every GPU node with the default image.
type VerifyOptions struct {
	// Image is the workload's image (default DefaultVerifyImage): a mirror's copy for air-gapped clusters.
	Image string `json:"image"`
	// Nodes is a label selector that narrows the GPU nodes ("" = all).
	Nodes string `json:"nodes,omitempty"`
	// Timeout bounds the wait for the workloads (default DefaultVerifyTimeout).
	Timeout time.Duration `json:"-"`
	// ImagePullSecrets name Secrets in the namespace to pull Image with.
	ImagePullSecrets []string `json:"imagePullSecrets,omitempty"`
	// LogLines is how many of a failed pod's last log lines to keep (default DefaultVerifyLogLines).
	LogLines int64 `json:"-"`
	// WaitForLock is how long to wait for another run's install lock (0: fail at once with lock.ErrLocked).
	WaitForLock time.Duration `json:"-"`
	// DryRun makes the plan and returns it: nothing is written, not even the lock.
	DryRun bool `json:"-"`
}

func (o VerifyOptions) withDefaults() VerifyOptions {
	if o.Image == "" {
		o.Image = DefaultVerifyImage
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultVerifyTimeout
	}
	if o.LogLines <= 0 {
		o.LogLines = DefaultVerifyLogLines
	}
	return o
}

// Verify runs one short CUDA workload on every GPU node and reports, per node, whether it ran. It
// plans every write first (plan.VerifyPlan): the pods an earlier verify run left behind, deleted
// first, and one pod per GPU node asking for what the node offers (verify_request.go; on the DRA stack
// through a ResourceClaimTemplate of the run's), removed on every way out, an interrupt included; the run carries
// out exactly that, as steps of runner.Runner (verify_steps.go). It creates pods, so it runs under
// gpuctl's install lock: the pods it removes first are never those of a verify still running, and no
// install changes the stack under it.
type Verify struct {
	Clients *kube.Clients
	Options VerifyOptions
	// Sink receives progress (nil: discarded).
	Sink event.Sink
}

// VerifyOutcome is one GPU node's verdict.
type VerifyOutcome string

// Verify outcomes.
const (
	VerifyPassed        VerifyOutcome = "passed"
	VerifyFailed        VerifyOutcome = "failed"
	VerifyUnschedulable VerifyOutcome = "unschedulable"
	VerifyTimeout       VerifyOutcome = "timeout"
)

// NodeVerification is one GPU node's result.
type NodeVerification struct {
	Node    string        `json:"node"`
	Pod     string        `json:"pod"`
	Outcome VerifyOutcome `json:"outcome"`
	// Resource is the extended resource the pod asked one of (nvidia.com/gpu, nvidia.com/mig-1g.5gb);
	// DeviceClass, instead, the class of the ResourceClaim it got its GPU through (gpu.nvidia.com).
	Resource    string `json:"resource,omitempty"`
	DeviceClass string `json:"deviceClass,omitempty"`
	// Reason says why a node did not pass: the container's exit, the scheduler's message, the state
	// the pod was last seen in.
	Reason string `json:"reason,omitempty"`
	// Logs are the failed container's last log lines (none when the logs cannot be read).
	Logs []string `json:"logs,omitempty"`
	// Events are the pod's events, oldest first ("Warning FailedScheduling: 0/6 nodes are available: …").
	Events []string `json:"events,omitempty"`
	// Duration is from the pod's creation to its verdict.
	Duration plan.Duration `json:"duration"`
}

// Request names what the node's pod asked for: "nvidia.com/mig-1g.5gb", "a ResourceClaim on
// gpu.nvidia.com" ("" in a result from before verify said).
func (n NodeVerification) Request() string {
	return plan.VerifyRequest{Resource: n.Resource, DeviceClass: n.DeviceClass}.String()
}

// VerifyResult is what gpuctl verify found.
type VerifyResult struct {
	// RunID is the value of the gpuctl.io/verify-run label on this run's pods.
	RunID     string `json:"runID"`
	Namespace string `json:"namespace"`
	Image     string `json:"image"`
	// DryRun: nothing was written; Plan is what a run would do.
	DryRun bool `json:"dryRun,omitempty"`
	// Passed is true when every node passed.
	Passed bool               `json:"passed"`
	Nodes  []NodeVerification `json:"nodes"`
	// Plan is every write the run decided on before its first.
	Plan *plan.VerifyPlan `json:"plan,omitempty"`
	// Done is what the run did, in the plan's shape: the earlier pods it deleted, the pods it created
	// and those of them it deleted at the end. A run that went as planned has Done equal to Plan.
	Done *plan.VerifyPlan `json:"done,omitempty"`
	// RemovedEarlier names the pods of earlier verify runs that this run deleted before it started
	// (Done.Delete's names).
	RemovedEarlier []string `json:"removedEarlier,omitempty"`
	// Removed names the pods this run created and deleted (Done.DeleteAtEnd).
	Removed []string `json:"removed,omitempty"`
	// RemovedClaimTemplates names the ResourceClaimTemplates this run deleted: earlier runs' and its own
	// (Done.DeleteClaimTemplates' and Done.DeleteClaimTemplatesAtEnd's names).
	RemovedClaimTemplates []string `json:"removedClaimTemplates,omitempty"`
	// Steps are the run's steps with their outcomes, the deletion of its pods last (none in a dry run).
	Steps []runner.StepResult `json:"steps,omitempty"`
	// Interrupted says how far an interrupted run got (nil when it was not interrupted).
	Interrupted *runner.InterruptedError `json:"interrupted,omitempty"`
}

// Run verifies. It returns ErrVerifyFailed (with the result) when a node did not pass, ErrNotInstalled
// when there is no GPU stack, ErrNoLabelledGPUNodes when no node is labelled a GPU node, and an plan.ErrInput error
// for a selector that does not parse or matches no GPU node; those three before anything is written.
// An interrupt ends it with a *runner.InterruptedError (with the result: the run's pods are deleted
// all the same). With DryRun it returns the plan and writes nothing.
func (v *Verify) Run(ctx context.Context) (*VerifyResult, error) {
	o := v.Options.withDefaults()
	sel, err := labels.Parse(o.Nodes)
	if err != nil {
		return nil, fmt.Errorf("%w: --nodes %q: %v", plan.ErrInput, o.Nodes, err)
	}
	if o.DryRun {
		p, err := v.plan(ctx, o, sel)
		if err != nil {
			return nil, err
		}
		if err := requireVerify(ctx, v.Clients, p); err != nil {
			return nil, err
		}
		return &VerifyResult{RunID: p.RunID, Namespace: p.Namespace, Image: p.Image, DryRun: true, Plan: p}, nil
	}
	var res *VerifyResult
	// The lock is taken before the install record, the nodes and the earlier pods are read, and
	// released after the run's pods are gone.
	err = runner.Locked(ctx, v.Clients, o.WaitForLock, v.Sink, func(ctx context.Context, _ *runner.Lock) error {
		p, err := v.plan(ctx, o, sel)
		if err != nil {
			return err
		}
		if err := requireVerify(ctx, v.Clients, p); err != nil {
			return err
		}
		r := newVerifyRun(v, o, p)
		res = r.res
		return r.run(ctx)
	})
	err = interrupted(ctx, err)
	if ie := (*runner.InterruptedError)(nil); res != nil && errors.As(err, &ie) {
		res.Interrupted = ie
	}
	return res, err
}

// requireVerify refuses (a failed preflight, exit 5) a run whose caller may not make its requests: one
// that could create its pods but not delete them would leave them holding GPUs.
func requireVerify(ctx context.Context, clients *kube.Clients, p *plan.VerifyPlan) error {
	return preflight.Require(ctx, clients.Kube, "gpuctl verify creates a pod per GPU node in "+p.Namespace+" and deletes it when done", verifyPermissions(p))
}

// verifyPermissions are the requests a verify run makes in its namespace: its pods created, watched
// and deleted (earlier runs' too), and its ResourceClaimTemplates created and deleted. Reading the
// pods' logs and events only adds to a failed node's verdict, so a run goes ahead without them.
func verifyPermissions(p *plan.VerifyPlan) []preflight.Permission {
	var perms []preflight.Permission
	for _, verb := range []string{"create", "delete", "get", "list", "watch"} {
		perms = append(perms, preflight.Permission{Verb: verb, Resource: "pods", Namespace: p.Namespace})
	}
	if len(p.ClaimTemplates) > 0 || len(p.DeleteClaimTemplates) > 0 {
		for _, verb := range []string{"create", "delete"} {
			perms = append(perms, preflight.Permission{Verb: verb, Group: "resource.k8s.io", Resource: "resourceclaimtemplates", Namespace: p.Namespace})
		}
	}
	return perms
}

// interrupted is err, or, when the user interrupted the run (ctx) before its runner began (while it
// waited for the lock, read the cluster or planned), an *runner.InterruptedError that says nothing
// was changed: every write of these verbs is a step of the runner, whose interrupts say more.
func interrupted(ctx context.Context, err error) error {
	if err == nil || !runner.Interrupted(ctx) || errors.As(err, new(*runner.InterruptedError)) {
		return err
	}
	return &runner.InterruptedError{BeforeFirstWrite: true}
}

func (v *Verify) emit(e event.Event) {
	if v.Sink != nil {
		e.Time = time.Now()
		v.Sink.Event(e)
	}
}
