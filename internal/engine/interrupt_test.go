package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/lock"
	"github.com/gpuctl/gpuctl/internal/plan"
)

func TestInterrupted(t *testing.T) {
	signalled, stop := context.WithCancel(context.Background())
	stop()
	lost, lose := context.WithCancelCause(context.Background())
	lose(lock.ErrLost)
	late, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-late.Done()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"a signal", signalled, true},
		{"a lost lock is not an interrupt", lost, false},
		{"the deadline is not an interrupt", late, false},
		{"running", context.Background(), false},
	} {
		if got := interrupted(tc.ctx); got != tc.want {
			t.Errorf("%s: interrupted = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestStopped(t *testing.T) {
	x := &executor{plan: &plan.Plan{Steps: []plan.Step{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}}}}
	x.results = []StepResult{{ID: "a", Outcome: event.StepSucceeded}, {ID: "b", Outcome: event.StepSkipped}}

	inFlight := &StepResult{ID: "c", Title: "Install c", Outcome: event.StepInterrupted, Message: "release c: deployed revision 2"}
	x.results = append(x.results, *inFlight)
	e := x.stopped(2, inFlight)
	if len(e.Finished) != 2 || e.InFlight != inFlight || len(e.NotStarted) != 1 || e.NotStarted[0] != "d" || e.Count != 4 {
		t.Errorf("stopped in c: %+v", e)
	}
	if !errors.Is(e, context.Canceled) {
		t.Error("an InterruptedError is not context.Canceled")
	}
	if got, want := e.Error(), "interrupted during step 3/4 (Install c): release c: deployed revision 2"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}

	x.results = x.results[:2]
	e = x.stopped(2, nil)
	if e.InFlight != nil || len(e.NotStarted) != 2 || e.Error() != "interrupted after step 2/4" {
		t.Errorf("stopped between b and c: %+v %q", e, e.Error())
	}
}
