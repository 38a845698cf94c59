package runner

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// stateTimeout bounds the look at the cluster an interrupted run takes to say where it stopped.
const stateTimeout = 10 * time.Second

// InterruptedError is what Install returns when the run was interrupted (Ctrl-C, SIGTERM). It wraps
// context.Canceled and says how far the run got: the steps that finished, the one in flight with its
// real state as read back from the cluster, and the ones that never started.
type InterruptedError struct {
	// BeforeFirstWrite: the run stopped while taking the lock, detecting, planning or in preflight,
	// so nothing was changed.
	BeforeFirstWrite bool `json:"beforeFirstWrite,omitempty"`
	// Finished are the steps that ended (succeeded or skipped) before the interrupt, in order.
	Finished []StepResult `json:"finished,omitempty"`
	// InFlight is the step the interrupt stopped, its Message the state it left behind; nil when the
	// run stopped between two steps.
	InFlight *StepResult `json:"inFlight,omitempty"`
	// NotStarted are the IDs of the steps that never began.
	NotStarted []string `json:"notStarted,omitempty"`
	// Count is the number of steps in the plan.
	Count int `json:"count,omitempty"`
	// Resume says how to go on ("run gpuctl install again: …").
	Resume string `json:"resume,omitempty"`
}

func (e *InterruptedError) Error() string {
	switch {
	case e.BeforeFirstWrite:
		return "interrupted before the first write: nothing was changed"
	case e.InFlight != nil:
		return fmt.Sprintf("interrupted during step %d/%d (%s): %s", len(e.Finished)+1, e.Count, e.InFlight.Title, e.InFlight.Message)
	default:
		return fmt.Sprintf("interrupted after step %d/%d", len(e.Finished), e.Count)
	}
}

// Unwrap makes errors.Is(err, context.Canceled) true.
func (e *InterruptedError) Unwrap() error { return context.Canceled }

// Interrupted: the run's context was cancelled by the user (a signal), not by its deadline and not
// because the install lock was lost (that cancellation carries lock.ErrLost as its cause).
func Interrupted(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.Canceled) && errors.Is(context.Cause(ctx), context.Canceled)
}
