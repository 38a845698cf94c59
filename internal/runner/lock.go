package runner

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/lock"
	"github.com/gpuctl/gpuctl/internal/preflight"
)

// ReleaseTimeout bounds the release of the lock at the end of a run, which has its own context: the
// run's may be cancelled (Ctrl-C) or past its deadline.
const ReleaseTimeout = 10 * time.Second

// Lock is gpuctl's install lock (internal/lock) held by one run of a verb that writes.
type Lock struct {
	held *lock.Held
	stop context.CancelCauseFunc
}

// TakeLock takes gpuctl's install lock for one run of a verb that writes (install, upgrade, taint,
// untaint, verify), waiting up to wait while another run holds it; after that the error is a
// *lock.HeldError naming the holder (errors.Is ErrLocked). Callers take it after their inputs are
// judged and before they read what they will change. The returned context is cancelled, with the
// lost lock's error as its cause, when the lock is lost (not renewed in time, or taken over): the run
// stops at its next API call rather than go on writing without it, and that cause tells the stop
// apart from an interrupt.
func TakeLock(ctx context.Context, clients *kube.Clients, wait time.Duration, sink event.Sink) (context.Context, *Lock, error) {
	return takeLock(ctx, installLock(clients, wait), sink)
}

// installLock is gpuctl's install lock with its default timing, waiting up to wait.
func installLock(clients *kube.Clients, wait time.Duration) *lock.Lock {
	return &lock.Lock{Client: clients.Kube.CoordinationV1(), Wait: wait}
}

// takeLock is TakeLock with the lock given, so tests can set its clock.
func takeLock(ctx context.Context, l *lock.Lock, sink event.Sink) (context.Context, *Lock, error) {
	sink = event.Or(sink)
	l.OnWait = func(e *lock.HeldError) {
		sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Message: fmt.Sprintf("waiting up to %s: %s", l.Wait, e)})
	}
	held, err := l.Acquire(ctx)
	if err != nil {
		return ctx, nil, err
	}
	if h := held.TookOver; h != nil {
		sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Message: fmt.Sprintf("took over the install lock of %s: that process is gone (killed before it could release the lock)", h)})
	}
	ctx, stop := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-held.Lost():
			stop(held.Err())
		case <-ctx.Done():
		}
	}()
	return ctx, &Lock{held: held, stop: stop}, nil
}

// Release stops watching the lock and frees the Lease; one that cannot be freed expires by itself.
func (w *Lock) Release(ctx context.Context) {
	w.stop(nil)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
	defer cancel()
	_ = w.held.Release(rctx)
}

// RunID is the holder identity of the lock: what the run labels its release writes with.
func (w *Lock) RunID() string { return w.held.Identity() }

// Lost says why a run that ended with err stopped when the lock was lost meanwhile (err otherwise).
func (w *Lock) Lost(err error) error {
	if lerr := w.held.Err(); lerr != nil && err != nil {
		return fmt.Errorf("%w; the run stopped: %v", lerr, err)
	}
	return err
}

// LockError is what a verb without install's preflight returns when it could not take the lock: a
// holder stays ErrLocked (exit 6); no permission to write the Lease is a failed preflight check (exit
// 5), as install reports it.
func LockError(err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%w: no permission to take gpuctl's install lock (gpuctl needs to create and update Leases in %s): %w", preflight.ErrFailed, lock.DefaultNamespace, err)
	}
	return err
}
