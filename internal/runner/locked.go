package runner

import (
	"context"
	"time"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/lock"
)

// Locked runs fn under gpuctl's install lock, as every verb that writes does: it takes the lock
// (TakeLock, waiting up to wait for another run's), runs fn with the lock's context (cancelled when
// the lock is lost), and releases the lock on every way out, after fn returns. A lock it could not
// take is LockError's error and fn never runs; a run that stopped because the lock was lost says so
// (Lock.Lost). Callers judge their inputs before they call it, and read what they will change in fn.
func Locked(ctx context.Context, clients *kube.Clients, wait time.Duration, sink event.Sink, fn func(ctx context.Context, lk *Lock) error) error {
	return locked(ctx, installLock(clients, wait), sink, fn)
}

// locked is Locked with the lock given, so tests can set its clock.
func locked(ctx context.Context, l *lock.Lock, sink event.Sink, fn func(ctx context.Context, lk *Lock) error) error {
	ctx, lk, err := takeLock(ctx, l, sink)
	if err != nil {
		return LockError(err)
	}
	defer lk.Release(ctx)
	return lk.Lost(fn(ctx, lk))
}
