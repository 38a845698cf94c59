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
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/runner"
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
	// those resources; without it such a purge stops before its first write (ForeignResourcesError).
	Force bool
	// DryRun makes the plan and returns it: nothing is written, not even the lock.
	DryRun bool
	// Adopt takes the releases of gpuctl's names as gpuctl's when there is no install record; without
	// it such an uninstall is refused before anything is written (runner.UnrecordedError, exit 5).
	Adopt bool
}

// Uninstall removes what gpuctl installed, in the reverse order of install: the ClusterPolicy and
// NVIDIADriver objects first (the operator removes its operands while it still runs), then the
// operator release, Google's driver installer, NFD, then the taints gpuctl added and the node labels
// NFD and the operator left. Helm's own `helm uninstall` leaves CRDs, custom resources and node labels
// behind (NVIDIA/gpu-operator docs: "Uninstall"), which is why this is more than a release deletion.
type Uninstall struct {
	Clients *kube.Clients
	Options UninstallOptions
	Sink    event.Sink
}

// UninstallResult is what Uninstall did.
type UninstallResult struct {
	// Plan is every decision the run carried out (or, with DryRun, would carry out).
	Plan   *runner.UninstallPlan `json:"plan,omitempty"`
	DryRun bool                  `json:"dryRun,omitempty"`
	Steps  []runner.StepResult   `json:"steps"`
	// Changed is false when there was nothing to uninstall.
	Changed bool `json:"changed"`
	// KeptNamespaces are the namespaces gpuctl created that --purge kept, because they hold objects
	// gpuctl did not create (named): the safe outcome, so not a failure.
	KeptNamespaces []runner.KeptNamespace `json:"keptNamespaces,omitempty"`
}

// Run uninstalls.
func (u *Uninstall) Run(ctx context.Context) (res *UninstallResult, err error) {
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
	uninstaller := func(rec *record.Record) *runner.Uninstaller {
		return &runner.Uninstaller{Clients: u.Clients, Record: rec, Purge: o.Purge, Force: o.Force, Adopt: o.Adopt, FinalizerWait: o.FinalizerWait, Sink: sink}
	}
	if o.DryRun {
		rec, err := record.Read(ctx, u.Clients.Kube)
		if err != nil {
			return &UninstallResult{DryRun: true}, err
		}
		un := uninstaller(rec)
		if err := refuseUnrecorded(ctx, u.Clients, un, sink); err != nil {
			return &UninstallResult{DryRun: true}, err
		}
		p, err := un.Plan(ctx)
		if err == nil {
			err = refuseOwned(ctx, u.Clients, uninstallTargets(p), sink)
		}
		if err == nil {
			err = requireUninstall(ctx, u.Clients, un, p)
		}
		return &UninstallResult{DryRun: true, Plan: p}, err
	}
	res = &UninstallResult{}
	// Without a record, releases of gpuctl's names are not taken as gpuctl's unless adopted: refused
	// before anything is written, the lock included. Plan asks again under the lock.
	rec, err := record.Read(ctx, u.Clients.Kube)
	if err != nil {
		return res, err
	}
	if err := refuseUnrecorded(ctx, u.Clients, uninstaller(rec), sink); err != nil {
		return res, err
	}
	err = runner.Locked(ctx, u.Clients, o.WaitForLock, sink, func(ctx context.Context, _ *runner.Lock) error {
		rec, err := record.Read(ctx, u.Clients.Kube)
		if err != nil {
			return err
		}
		un := uninstaller(rec)
		// Every decision is made here, before the first write; the steps carry the plan out.
		if res.Plan, err = un.Plan(ctx); err != nil {
			return err
		}
		// What a GitOps engine manages is never deleted by gpuctl: the engine would put it back.
		if err := refuseOwned(ctx, u.Clients, uninstallTargets(res.Plan), sink); err != nil {
			return err
		}
		if err := requireUninstall(ctx, u.Clients, un, res.Plan); err != nil {
			return err
		}
		r, err := un.Run(ctx, res.Plan)
		res.Steps, res.Changed, res.KeptNamespaces = r.Results, r.Changed, un.KeptNamespaces()
		return err
	})
	if err == nil && o.Purge {
		// --purge leaves nothing of gpuctl's: the lock's Lease goes too, once released (a run waiting
		// for it creates it again).
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), runner.ReleaseTimeout)
		defer rcancel()
		purgeLease(rctx, u.Clients)
	}
	return res, err
}

// refuseUnrecorded refuses an uninstall without an install record that finds releases of gpuctl's
// names (runner.UnrecordedError, exit 5) unless adopted. A release a GitOps engine manages is refused
// as that first: the engine, not --adopt, is the way to remove it.
func refuseUnrecorded(ctx context.Context, clients *kube.Clients, un *runner.Uninstaller, sink event.Sink) error {
	err := un.RefuseUnrecorded(ctx)
	var ue *runner.UnrecordedError
	if !errors.As(err, &ue) {
		return err
	}
	var t writeTargets
	for _, r := range ue.Releases {
		t.releases = append(t.releases, plan.Release{Name: r.Name, Namespace: r.Namespace})
	}
	if oerr := refuseOwned(ctx, clients, t, sink); oerr != nil {
		return oerr
	}
	sink.Event(event.Event{Time: time.Now(), Type: event.StepFailed, Step: preflightStep, Title: preflightTitle, Err: ue.Error(),
		Hint: "if gpuctl installed them, gpuctl uninstall --adopt removes them; if not, remove them with the tool that did (helm uninstall NAME -n NAMESPACE)"})
	return err
}

// requireUninstall refuses (a failed preflight, exit 5) an uninstall whose caller may not make every
// request that removes the stack (runner.Uninstaller.Permissions): it would stop half way, the
// operator gone and its operands, taints or labels left.
func requireUninstall(ctx context.Context, clients *kube.Clients, un *runner.Uninstaller, p *runner.UninstallPlan) error {
	perms, err := un.Permissions(ctx, p)
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
