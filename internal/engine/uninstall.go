package engine

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/lock"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/runner"
	"github.com/gpuctl/gpuctl/internal/uninstall"
)

// UninstallOptions are the choices of `gpuctl uninstall`.
type UninstallOptions struct {
	// Purge also deletes the CRDs and namespaces gpuctl created (never ones it found), and the record.
	Purge bool
	// Timeout bounds the whole run (default DefaultUninstallTimeout).
	Timeout time.Duration
	// FinalizerWait is how long a deleted object may stay before uninstall stops and names what holds
	// it (default DefaultFinalizerWait).
	FinalizerWait time.Duration
	// WaitForLock is how long to wait for another run's install lock (0: fail at once with lock.ErrLocked).
	WaitForLock time.Duration
	// Force lets --purge delete CRDs that have custom resources gpuctl did not create, and with them
	// those resources; without it such a purge stops before its first write
	// (uninstall.ForeignResourcesError).
	Force bool
	// DryRun makes the plan and returns it: nothing is written, not even the lock.
	DryRun bool
	// Adopt takes the releases of gpuctl's names as gpuctl's when there is no install record; without
	// it such an uninstall is refused before anything is written (uninstall.UnrecordedError, exit 5).
	Adopt bool
}

// Uninstall removes what gpuctl installed, in the reverse order of install: the ClusterPolicy and
// NVIDIADriver objects first (the operator removes its operands while it still runs), then the
// operator release, Google's driver installer, NFD, then the taints gpuctl added and the node labels
// NFD and the operator left. Helm's own `helm uninstall` leaves CRDs, custom resources and node labels
// behind (NVIDIA/gpu-operator docs: "Uninstall"), which is why this is more than a release deletion.
// The decisions and the steps are internal/uninstall's; this is the verb's outline around them.
type Uninstall struct {
	Clients *kube.Clients
	Options UninstallOptions
	Sink    event.Sink
}

// UninstallResult is what Uninstall did.
type UninstallResult struct {
	// Plan is every decision the run carried out (or, with DryRun, would carry out).
	Plan   *uninstall.Plan     `json:"plan,omitempty"`
	DryRun bool                `json:"dryRun,omitempty"`
	Steps  []runner.StepResult `json:"steps"`
	// Changed is false when there was nothing to uninstall.
	Changed bool `json:"changed"`
	// KeptNamespaces are the namespaces gpuctl created that --purge kept, because they hold objects
	// gpuctl did not create (named): the safe outcome, so not a failure.
	KeptNamespaces []uninstall.KeptNamespace `json:"keptNamespaces,omitempty"`
}

// Run uninstalls: it refuses an uninstall without a record before the lock (unless adopted), then
// under the lock (none for a dry run) reads the cluster, makes the plan and refuses what must be
// refused (decide); a dry run returns the plan there, a run carries it out.
func (u *Uninstall) Run(ctx context.Context) (*UninstallResult, error) {
	o := u.Options
	if o.Timeout == 0 {
		o.Timeout = DefaultUninstallTimeout
	}
	if o.FinalizerWait == 0 {
		o.FinalizerWait = DefaultFinalizerWait
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	sink := event.Or(u.Sink)
	res := &UninstallResult{DryRun: o.DryRun}
	// Without a record, releases of gpuctl's names are not taken as gpuctl's unless adopted: refused
	// before anything is written, the lock included. Build asks again under the lock.
	if err := u.refuseUnrecorded(ctx, sink); err != nil {
		return res, err
	}
	err := lockedUnlessDry(ctx, o.DryRun, u.Clients, o.WaitForLock, sink, func(ctx context.Context) error {
		var err error
		if res.Plan, err = u.decide(ctx, sink); err != nil || o.DryRun {
			return err
		}
		done, err := (&uninstall.Executor{Clients: u.Clients, FinalizerWait: o.FinalizerWait, Sink: sink}).Run(ctx, res.Plan)
		res.Steps, res.Changed, res.KeptNamespaces = done.Steps, done.Changed, done.KeptNamespaces
		return err
	})
	if err == nil && o.Purge && !o.DryRun {
		// --purge leaves nothing of gpuctl's: the lock's Lease goes too, once released (a run waiting
		// for it creates it again).
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), runner.ReleaseTimeout)
		defer rcancel()
		purgeLease(rctx, u.Clients)
	}
	return res, err
}

// options are the choices the uninstall's plan depends on.
func (u *Uninstall) options() uninstall.Options {
	return uninstall.Options{Purge: u.Options.Purge, Force: u.Options.Force, Adopt: u.Options.Adopt}
}

// decide makes every decision of the uninstall before its first write: it reads the cluster, builds
// the plan, and refuses what a GitOps engine manages and what the caller may not do. The plan is
// returned with a refusal too (a dry run prints it).
func (u *Uninstall) decide(ctx context.Context, sink event.Sink) (*uninstall.Plan, error) {
	s, err := uninstall.Read(ctx, u.Clients, u.options())
	if err != nil {
		return nil, err
	}
	p, err := uninstall.Build(s, u.options())
	if err != nil {
		return p, err
	}
	// What a GitOps engine manages is never deleted by gpuctl: the engine would put it back.
	if err := refuseOwned(ctx, u.Clients, uninstallTargets(p), sink); err != nil {
		return p, err
	}
	return p, requireUninstall(ctx, u.Clients, s, p)
}

// refuseUnrecorded refuses an uninstall without an install record that finds releases of gpuctl's
// names (uninstall.UnrecordedError, exit 5) unless adopted. A release a GitOps engine manages is
// refused as that first: the engine, not --adopt, is the way to remove it.
func (u *Uninstall) refuseUnrecorded(ctx context.Context, sink event.Sink) error {
	s, err := uninstall.ReadReleases(ctx, u.Clients, u.options())
	if err != nil {
		return err
	}
	err = uninstall.RefuseUnrecorded(s, u.options())
	var ue *uninstall.UnrecordedError
	if !errors.As(err, &ue) {
		return err
	}
	var t writeTargets
	for _, r := range ue.Releases {
		t.releases = append(t.releases, plan.Release{Name: r.Name, Namespace: r.Namespace})
	}
	if oerr := refuseOwned(ctx, u.Clients, t, sink); oerr != nil {
		return oerr
	}
	sink.Event(event.Event{Time: time.Now(), Type: event.StepFailed, Step: preflightStep, Title: preflightTitle, Err: ue.Error(),
		Hint: "if gpuctl installed them, gpuctl uninstall --adopt removes them; if not, remove them with the tool that did (helm uninstall NAME -n NAMESPACE)"})
	return err
}

// requireUninstall refuses (a failed preflight, exit 5) an uninstall whose caller may not make every
// request that removes the stack (uninstall.Permissions): it would stop half way, the operator gone
// and its operands, taints or labels left.
func requireUninstall(ctx context.Context, clients *kube.Clients, s *uninstall.Snapshot, p *uninstall.Plan) error {
	perms, err := uninstall.Permissions(s, p)
	if err != nil {
		return err
	}
	return preflight.Require(ctx, clients.Kube, "gpuctl uninstall removes the releases, objects, taints and labels its plan names", perms)
}

// purgeLease deletes the lock's Lease when no run holds it.
func purgeLease(ctx context.Context, clients *kube.Clients) {
	leases := clients.Kube.CoordinationV1().Leases(lock.DefaultNamespace)
	l, err := leases.Get(ctx, lock.DefaultName, metav1.GetOptions{})
	if err != nil || (l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "") {
		return
	}
	_ = leases.Delete(ctx, lock.DefaultName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &l.ResourceVersion}})
}
