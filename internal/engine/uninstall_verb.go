package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/lock"
	"github.com/gpuctl/gpuctl/internal/record"
)

// UninstallOptions are the choices of `gpuctl uninstall`.
type UninstallOptions struct {
	// Purge also deletes the CRDs and namespaces gpuctl created (never ones it found), and the record.
	Purge bool
	// Timeout bounds the whole run (default 10m).
	Timeout time.Duration
	// FinalizerWait is how long a deleted object may stay before uninstall stops and names what holds
	// it (default 2m).
	FinalizerWait time.Duration
	// WaitForLock is how long to wait for another run's install lock (0: fail at once with ErrLocked).
	WaitForLock time.Duration
	// Force lets --purge delete CRDs that have custom resources gpuctl did not create, and with them
	// those resources; without it such a purge stops before its first write (ForeignResourcesError).
	Force bool
	// DryRun makes the plan and returns it: nothing is written, not even the lock.
	DryRun bool
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
	Plan   *UninstallPlan `json:"plan,omitempty"`
	DryRun bool           `json:"dryRun,omitempty"`
	Steps  []StepResult   `json:"steps"`
	// Changed is false when there was nothing to uninstall.
	Changed bool `json:"changed"`
}

// Run uninstalls.
func (u *Uninstall) Run(ctx context.Context) (res *UninstallResult, err error) {
	o := u.Options
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.FinalizerWait == 0 {
		o.FinalizerWait = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	sink := event.Or(u.Sink)
	if o.DryRun {
		rec, err := record.Read(ctx, u.Clients.Kube)
		if err != nil {
			return &UninstallResult{DryRun: true}, err
		}
		un := &uninstaller{Clients: u.Clients, Record: rec, Purge: o.Purge, Force: o.Force, FinalizerWait: o.FinalizerWait, Sink: sink}
		p, err := un.plan(ctx)
		return &UninstallResult{DryRun: true, Plan: p}, err
	}
	ctx, lk, err := takeLock(ctx, u.Clients, o.WaitForLock, sink)
	if err != nil {
		return &UninstallResult{}, lockError(err)
	}
	defer func() {
		lk.release(ctx)
		if err == nil && o.Purge {
			// --purge leaves nothing of gpuctl's: the lock's Lease goes too, once released (a run
			// waiting for it creates it again).
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
			defer rcancel()
			purgeLease(rctx, u.Clients)
		}
		err = lk.lost(err)
	}()

	rec, err := record.Read(ctx, u.Clients.Kube)
	if err != nil {
		return &UninstallResult{}, err
	}
	un := &uninstaller{Clients: u.Clients, Record: rec, Purge: o.Purge, Force: o.Force, FinalizerWait: o.FinalizerWait, Sink: sink}
	// Every decision is made here, before the first write; the steps carry the plan out.
	p, err := un.plan(ctx)
	if err != nil {
		return &UninstallResult{Plan: p}, err
	}
	un.p = p
	steps := un.steps()
	res = &UninstallResult{Plan: p}
	for i, s := range steps {
		base := event.Event{Step: s.id, Title: s.title, Index: i + 1, Count: len(steps)}
		emit := func(e event.Event) {
			e.Step, e.Title, e.Index, e.Count, e.Time = base.Step, base.Title, base.Index, base.Count, time.Now()
			sink.Event(e)
		}
		emit(event.Event{Type: event.StepStarted})
		out, err := s.run(ctx, func(msg string) { emit(event.Event{Type: event.StepProgress, Message: msg}) })
		if err != nil {
			ev := event.Event{Type: event.StepFailed, Err: err.Error(), Hint: s.hint}
			var fe *FinalizerError
			if errors.As(err, &fe) {
				ev.Hint = finalizerHint(fe)
			}
			if errors.Is(err, context.Canceled) {
				ev.Err, ev.Hint = "interrupted", "run gpuctl uninstall again: it continues where it stopped"
			}
			emit(ev)
			res.Steps = append(res.Steps, StepResult{ID: s.id, Title: s.title, Outcome: event.StepFailed, Message: ev.Err})
			return res, fmt.Errorf("%s: %w", strings.ToLower(s.title[:1])+s.title[1:], err)
		}
		typ := event.StepSucceeded
		if out.skipped {
			typ = event.StepSkipped
		}
		emit(event.Event{Type: typ, Message: out.message})
		res.Changed = res.Changed || out.changed
		res.Steps = append(res.Steps, StepResult{ID: s.id, Title: s.title, Outcome: typ, Message: out.message, Changed: out.changed})
	}
	return res, nil
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
