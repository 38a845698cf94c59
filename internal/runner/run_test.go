package runner

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
)

// hintedError is an error that says what to do next, as uninstall's FinalizerError does.
type hintedError struct{ msg, hint string }

func (e *hintedError) Error() string { return e.msg }
func (e *hintedError) Hint() string  { return e.hint }

// testSteps are four steps a-d; the behaviour of each is set by the test case.
func testSteps(do map[string]func(ctx context.Context, cancel context.CancelFunc) (Outcome, error), cancel context.CancelFunc) []Step {
	var steps []Step
	for _, id := range []string{"a", "b", "c", "d"} {
		s := Step{ID: id, Title: "Step " + id, Hint: "hint of " + id,
			State: func(context.Context) (string, error) { return "state of " + id, nil }}
		f := do[id]
		s.Do = func(ctx context.Context, progress func(health.Progress)) (Outcome, error) {
			progress(health.Progress{Message: "working on " + id})
			if f != nil {
				return f(ctx, cancel)
			}
			return Outcome{Message: id + " done", Changed: id == "b"}, nil
		}
		steps = append(steps, s)
	}
	return steps
}

func TestRunner(t *testing.T) {
	for _, tc := range []struct {
		name string
		skip string // a step skipped by the plan
		do   map[string]func(ctx context.Context, cancel context.CancelFunc) (Outcome, error)
		// want: the results' outcomes by step, the error's text ("" = none), and for an interrupt
		// what it says.
		outcomes    []string
		err         string
		interrupted *InterruptedError
		failed      event.Event
	}{
		{name: "every step runs in order", skip: "c",
			outcomes: []string{"a:succeeded", "b:succeeded", "c:skipped", "d:succeeded"}},
		{name: "a failed step stops the run, its error prefixed with its title",
			do: map[string]func(context.Context, context.CancelFunc) (Outcome, error){
				"b": func(context.Context, context.CancelFunc) (Outcome, error) { return Outcome{}, errors.New("boom") },
			},
			outcomes: []string{"a:succeeded", "b:failed"}, err: "step b: boom",
			failed: event.Event{Type: event.StepFailed, Step: "b", Err: "boom", Hint: "hint of b"}},
		{name: "a step's own hint and diagnosis win over the step's",
			do: map[string]func(context.Context, context.CancelFunc) (Outcome, error){
				"a": func(context.Context, context.CancelFunc) (Outcome, error) {
					return Outcome{}, &StepError{Err: errors.New("boom"), Hint: "do this", Detail: "because"}
				},
			},
			outcomes: []string{"a:failed"}, err: "step a: boom",
			failed: event.Event{Type: event.StepFailed, Step: "a", Err: "boom", Hint: "do this", Detail: "because"}},
		{name: "an error that says what to do next wins over the step's hint",
			do: map[string]func(context.Context, context.CancelFunc) (Outcome, error){
				"a": func(context.Context, context.CancelFunc) (Outcome, error) {
					return Outcome{}, fmt.Errorf("delete: %w", &hintedError{msg: "ClusterPolicy cluster-policy is still there after 0s: finalizer example.com/hold holds it",
						hint: "remove the finalizer example.com/hold"})
				},
			},
			outcomes: []string{"a:failed"}, err: "step a: delete: ClusterPolicy cluster-policy is still there after 0s: finalizer example.com/hold holds it",
			failed: event.Event{Type: event.StepFailed, Step: "a", Err: "delete: ClusterPolicy cluster-policy is still there after 0s: finalizer example.com/hold holds it",
				Hint: "remove the finalizer example.com/hold"}},
		{name: "an interrupt during a step reads back its state",
			do: map[string]func(context.Context, context.CancelFunc) (Outcome, error){
				"c": func(ctx context.Context, cancel context.CancelFunc) (Outcome, error) {
					cancel()
					return Outcome{}, ctx.Err()
				},
			},
			outcomes: []string{"a:succeeded", "b:succeeded", "c:interrupted"}, err: "interrupted during step 3/4 (Step c): state of c",
			interrupted: &InterruptedError{Count: 4, NotStarted: []string{"d"}, Resume: "go on",
				InFlight: &StepResult{ID: "c", Title: "Step c", Outcome: event.StepInterrupted, Message: "state of c"}}},
		{name: "an interrupt between steps starts no other",
			do: map[string]func(context.Context, context.CancelFunc) (Outcome, error){
				"b": func(_ context.Context, cancel context.CancelFunc) (Outcome, error) {
					cancel()
					return Outcome{Message: "b done"}, nil
				},
			},
			outcomes: []string{"a:succeeded", "b:succeeded"}, err: "interrupted after step 2/4",
			interrupted: &InterruptedError{Count: 4, NotStarted: []string{"c", "d"}, Resume: "go on"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var events []event.Event
			r := &Runner{Sink: event.SinkFunc(func(e event.Event) { events = append(events, e) }), Resume: "go on"}
			steps := testSteps(tc.do, cancel)
			for i := range steps {
				if steps[i].ID == tc.skip {
					steps[i].Skip = "not needed"
				}
			}
			err := r.Run(ctx, steps)
			var got []string
			for _, res := range r.Results {
				got = append(got, res.ID+":"+string(res.Outcome))
			}
			if !reflect.DeepEqual(got, tc.outcomes) {
				t.Errorf("outcomes %v, want %v", got, tc.outcomes)
			}
			if (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			if tc.interrupted != nil {
				var ie *InterruptedError
				if !errors.As(err, &ie) || !errors.Is(err, context.Canceled) {
					t.Fatalf("error %T is not an interrupt", err)
				}
				if len(ie.Finished) != 2 || ie.Count != tc.interrupted.Count || !reflect.DeepEqual(ie.NotStarted, tc.interrupted.NotStarted) ||
					!reflect.DeepEqual(ie.InFlight, tc.interrupted.InFlight) || ie.Resume != "go on" {
					t.Errorf("interrupt %+v, want %+v", ie, tc.interrupted)
				}
			}
			if tc.failed.Type != "" {
				last := events[len(events)-1]
				last.Time, last.Title, last.Index, last.Count = tc.failed.Time, "", 0, 0
				if !reflect.DeepEqual(last, tc.failed) {
					t.Errorf("last event %+v, want %+v", last, tc.failed)
				}
			}
			if tc.err == "" && !r.Changed {
				t.Error("step b changed the cluster, the run says it did not")
			}
			for _, e := range events {
				if e.Index == 0 || e.Count != 4 || !strings.HasPrefix(e.Title, "Step ") {
					t.Errorf("event without its place in the plan: %+v", e)
				}
			}
		})
	}
}

// An earlier step may decide that a later one has nothing to do (install's safety check drops the
// taint once NFD has found the GPU nodes): the runner asks just before the step would start.
func TestRunnerAsksWhetherToSkipWhenTheStepComes(t *testing.T) {
	reason := ""
	ran := false
	steps := []Step{
		{ID: "a", Title: "Step a", Do: func(context.Context, func(health.Progress)) (Outcome, error) {
			reason = "decided by a"
			return Outcome{}, nil
		}},
		{ID: "b", Title: "Step b", Skipped: func() string { return reason }, Do: func(context.Context, func(health.Progress)) (Outcome, error) {
			ran = true
			return Outcome{}, nil
		}},
	}
	r := &Runner{}
	if err := r.Run(t.Context(), steps); err != nil {
		t.Fatal(err)
	}
	if ran || len(r.Results) != 2 || r.Results[1].Outcome != event.StepSkipped || r.Results[1].Message != "decided by a" {
		t.Errorf("step b ran %v; results %+v", ran, r.Results)
	}
}
