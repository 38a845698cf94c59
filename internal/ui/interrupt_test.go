package ui

import (
	"bytes"
	"testing"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/runner"
)

func TestPrintInterrupted(t *testing.T) {
	finished := []runner.StepResult{
		{ID: "namespace", Outcome: event.StepSucceeded},
		{ID: "crds", Outcome: event.StepSucceeded},
		{ID: "nfd", Outcome: event.StepSkipped},
	}
	for _, tc := range []struct {
		name string
		err  *runner.InterruptedError
		want string
	}{
		{"before the first write", &runner.InterruptedError{BeforeFirstWrite: true},
			"gpuctl: interrupted before the first write: nothing was changed.\n"},
		{"in a step: its real state", &runner.InterruptedError{Count: 6, Finished: finished,
			InFlight:   &runner.StepResult{ID: "gpu-operator", Title: "Install gpu-operator", Outcome: event.StepInterrupted, Message: "release gpu-operator: deployed revision 2"},
			NotStarted: []string{"wait-operator", "wait-validators"}},
			"gpuctl: interrupted during step 4/6, Install gpu-operator.\n" +
				"  finished:     namespace, crds, nfd\n" +
				"  in flight:    gpu-operator: release gpu-operator: deployed revision 2\n" +
				"  not started:  wait-operator, wait-validators\n" +
				"To go on, " + runner.ResumeHint + ".\n"},
		{"between steps", &runner.InterruptedError{Count: 4, Finished: finished, NotStarted: []string{"taint"}},
			"gpuctl: interrupted after step 3/4.\n" +
				"  finished:     namespace, crds, nfd\n" +
				"  not started:  taint\n" +
				"To go on, " + runner.ResumeHint + ".\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := PrintInterrupted(&b, tc.err); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestProgressShowsAnInterruptedStep(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, FormatPlain, Style{})
	p.Event(event.Event{Type: event.StepStarted, Step: "gpu-operator", Title: "Install gpu-operator", Index: 4, Count: 6})
	p.Event(event.Event{Type: event.StepInterrupted, Step: "gpu-operator", Title: "Install gpu-operator", Index: 4, Count: 6,
		Message: "release gpu-operator: deployed revision 2", Hint: runner.ResumeHint})
	p.Close()
	want := "[4/6] Install gpu-operator …\n[4/6] interrupted Install gpu-operator: release gpu-operator: deployed revision 2\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
