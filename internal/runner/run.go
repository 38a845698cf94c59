package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
)

// ResumeHint is what an interrupted install or upgrade tells the user to do.
const ResumeHint = "run gpuctl install again: it continues where this run stopped"

// Step is one step of a plan as the runner carries it out. Every verb that writes turns its plan
// into Steps (an install Plan's by its kinds, an UninstallPlan's by its parts) and hands them to Run.
type Step struct {
	ID, Title string
	// Skip, when set, says why the step does nothing; Run reports it skipped and does not call Do.
	Skip string
	// Skipped, when set, is asked just before the step would start, for a reason to skip it that an
	// earlier step decided (install's safety check drops the taint and the wait for gpuctl's policy
	// once NFD has found the GPU nodes); "" runs it.
	Skipped func() string
	// Hint is said when the step fails (unless its error carries a better one).
	Hint string
	// Do carries the step out, reporting progress as it goes.
	Do func(ctx context.Context, progress func(health.Progress)) (Outcome, error)
	// State reads back, after an interrupt, what the step left in the cluster ("" when it changed
	// nothing, e.g. a wait). Nil: the step only reads or waits.
	State func(ctx context.Context) (string, error)
	// Explain adds to a failed step's event what only a look at the cluster tells (nil: nothing).
	Explain func(ctx context.Context, ev *event.Event)
}

// skip is why the step does nothing now ("" = it runs).
func (s *Step) skip() string {
	if s.Skip == "" && s.Skipped != nil {
		return s.Skipped()
	}
	return s.Skip
}

// Outcome is what one step reports when it ends well.
type Outcome struct {
	Message string
	Changed bool
	Skipped bool
}

// StepResult is the outcome of one step.
type StepResult struct {
	ID      string     `json:"id"`
	Title   string     `json:"title"`
	Outcome event.Type `json:"outcome"`
	Message string     `json:"message,omitempty"`
	Changed bool       `json:"changed"`
}

// StepError is a failed step's error with what helps a person: a hint and a diagnosis.
type StepError struct {
	Err    error
	Hint   string
	Detail string
}

func (e *StepError) Error() string { return e.Err.Error() }

// Unwrap returns the step's error.
func (e *StepError) Unwrap() error { return e.Err }

// Runner carries out Steps in order: one event per start, progress, end; the run stops at the first
// failure; an interrupt (Ctrl-C) between or during steps ends it with an *InterruptedError that says
// how far it got, with the in-flight step's real state read back from the cluster.
type Runner struct {
	Sink event.Sink
	// Resume says how to go on after an interrupt ("run gpuctl install again: …").
	Resume string
	// Results are the steps' outcomes, in order, as they end.
	Results []StepResult
	// Changed is true once a step changed the cluster.
	Changed bool
}

// Run carries out steps. A failed step's error is returned prefixed with its title.
func (r *Runner) Run(ctx context.Context, steps []Step) error {
	sink := event.Or(r.Sink)
	for i := range steps {
		s := &steps[i]
		emit := func(e event.Event) {
			e.Step, e.Title, e.Index, e.Count, e.Time = s.ID, s.Title, i+1, len(steps), time.Now()
			sink.Event(e)
		}
		if skip := s.skip(); skip != "" {
			emit(event.Event{Type: event.StepSkipped, Message: skip})
			r.Results = append(r.Results, StepResult{ID: s.ID, Title: s.Title, Outcome: event.StepSkipped, Message: skip})
			continue
		}
		if Interrupted(ctx) {
			// Interrupted between two steps (or while a Helm write was allowed to finish).
			return r.stopped(steps, i, nil)
		}
		if err := r.step(ctx, s, emit); err != nil {
			if ie := (*InterruptedError)(nil); errors.As(err, &ie) {
				return r.stopped(steps, i, ie.InFlight)
			}
			return fmt.Errorf("%s: %w", strings.ToLower(s.Title[:1])+s.Title[1:], err)
		}
	}
	return nil
}

// step runs one step and records its result; an interrupt during it comes back as an
// *InterruptedError whose InFlight is the step.
func (r *Runner) step(ctx context.Context, s *Step, emit func(event.Event)) error {
	emit(event.Event{Type: event.StepStarted})
	lastProgress := ""
	out, err := s.Do(ctx, func(p health.Progress) {
		lastProgress = p.Message
		emit(event.Event{Type: event.StepProgress, Message: p.Message, Done: p.Done, Total: p.Total, Pending: p.Pending})
	})
	switch {
	case err != nil && Interrupted(ctx):
		// Every wait and write gives up on a cancelled context, whatever error it wraps; what the
		// user needs is what this step left behind, read back from the cluster.
		state := stateOf(ctx, s, lastProgress)
		emit(event.Event{Type: event.StepInterrupted, Message: state, Hint: r.Resume})
		res := StepResult{ID: s.ID, Title: s.Title, Outcome: event.StepInterrupted, Message: state}
		r.Results = append(r.Results, res)
		return &InterruptedError{InFlight: &res}
	case err != nil:
		ev := failedEvent(err, s.Hint)
		if s.Explain != nil && !errors.Is(err, context.Canceled) {
			s.Explain(ctx, &ev)
		}
		emit(ev)
		r.Results = append(r.Results, StepResult{ID: s.ID, Title: s.Title, Outcome: event.StepFailed, Message: ev.Err})
		return err
	}
	typ := event.StepSucceeded
	if out.Skipped {
		typ = event.StepSkipped
	}
	emit(event.Event{Type: typ, Message: out.Message})
	r.Changed = r.Changed || out.Changed
	r.Results = append(r.Results, StepResult{ID: s.ID, Title: s.Title, Outcome: typ, Message: out.Message, Changed: out.Changed})
	return nil
}

// failedEvent is the event of a step that failed with err: the hint and diagnosis its error carries
// (a *StepError, an error with a Hint method, a wait's *health.StuckError), else the step's own hint.
func failedEvent(err error, hint string) event.Event {
	ev := event.Event{Type: event.StepFailed, Err: err.Error(), Hint: hint}
	if se := (*StepError)(nil); errors.As(err, &se) {
		if se.Hint != "" {
			ev.Hint = se.Hint
		}
		ev.Detail = se.Detail
	}
	// An error that knows what to do next says so (a finalizer holding an object, a release another
	// Helm operation holds), whichever step returned it.
	if h := (interface{ Hint() string })(nil); errors.As(err, &h) && h.Hint() != "" {
		ev.Hint = h.Hint()
	}
	if stuck := (*health.StuckError)(nil); errors.As(err, &stuck) {
		ev.Hint = stuck.Hint
		if ev.Hint == "" && len(stuck.Report.Hints) > 0 {
			ev.Hint = stuck.Report.Hints[0].Message
		}
		ev.Detail = stuck.Report.String()
	}
	return ev
}

// stateOf reads back what an interrupted step left in the cluster, for the summary. A wait changes
// nothing; it says what it last saw. The look has its own short deadline, as the run's context is
// cancelled.
func stateOf(ctx context.Context, s *Step, lastProgress string) string {
	if s.State != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stateTimeout)
		defer cancel()
		state, err := s.State(ctx)
		switch {
		case err != nil:
			return "its state could not be read: " + err.Error()
		case state != "":
			return state
		}
	}
	switch {
	case s.State == nil && lastProgress != "":
		return "stopped before it finished (last seen: " + lastProgress + ")"
	case s.State == nil:
		return "stopped before it finished"
	case lastProgress != "":
		return "nothing changed (it was waiting; last seen: " + lastProgress + ")"
	default:
		return "nothing changed (it was waiting)"
	}
}

// stopped builds the InterruptedError of a run stopped at step index i (0-based); inFlight is that
// step's result, or nil when the run stopped before it began.
func (r *Runner) stopped(steps []Step, i int, inFlight *StepResult) *InterruptedError {
	e := &InterruptedError{Count: len(steps), InFlight: inFlight, Resume: r.Resume}
	for _, res := range r.Results {
		if res.Outcome == event.StepSucceeded || res.Outcome == event.StepSkipped {
			e.Finished = append(e.Finished, res)
		}
	}
	next := i
	if inFlight != nil {
		next++
	}
	for _, s := range steps[next:] {
		e.NotStarted = append(e.NotStarted, s.ID)
	}
	return e
}
