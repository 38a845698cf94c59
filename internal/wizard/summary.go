package wizard

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/runner"
	"github.com/gpuctl/gpuctl/internal/ui"
)

// replay is the command that continues or repeats this install without the wizard.
func replay(s session) string {
	if s.saved != "" {
		return "gpuctl install --config " + quote(s.saved)
	}
	return Command(s.opts, s.cfg.Namespace, s.kubeContext)
}

// summary is the plain text printed once the program has ended: what happened and what to do next.
// in is the install screen when the wizard ended on it.
func summary(s session, o Outcome, in *installScreen) string {
	b := &strings.Builder{}
	var ie *runner.InterruptedError
	if errors.As(o.Err, &ie) && ie.BeforeFirstWrite {
		o.Quit = true
	}
	switch {
	case o.Quit:
		fmt.Fprintln(b, "gpuctl wizard stopped before changing anything: nothing was changed.")
		if s.review != nil && s.review.Plan != nil {
			fmt.Fprintf(b, "To install with these choices without the wizard:\n  %s\n", replay(s))
		}
	case o.Err == nil && o.Result != nil:
		_ = ui.PrintInstallResult(b, o.Result, s.cfg.Namespace, ui.Style{TTY: true, Color: s.cfg.Color})
		fmt.Fprintf(b, "  %s   # the same install, e.g. in CI; a re-run changes nothing\n", replay(s))
	case o.Err != nil:
		if in == nil {
			in = &installScreen{s: s} // no step ran
		}
		in.stoppedSummary(b, o.Err)
	}
	return b.String()
}

// stoppedSummary says how far an install that failed or was interrupted got.
func (in *installScreen) stoppedSummary(b *strings.Builder, err error) {
	var done, stopped []string
	for i := range in.steps {
		s := &in.steps[i]
		switch {
		case s.interrupted():
			if s.message != "" {
				stopped = append(stopped, s.title+" ("+s.message+")")
			} else {
				stopped = append(stopped, s.title)
			}
		case s.state == event.StepSucceeded || s.state == event.StepSkipped:
			if s.id != preflightStep {
				done = append(done, s.title)
			}
		}
	}
	if in.stopping || errors.Is(err, context.Canceled) {
		fmt.Fprintln(b, "The install was interrupted.")
	} else {
		fmt.Fprintf(b, "The install failed: %v\n", err)
	}
	if len(done) > 0 {
		fmt.Fprintf(b, "Finished: %s.\n", strings.Join(done, "; "))
	} else {
		fmt.Fprintln(b, "No step had finished: nothing was changed.")
	}
	if len(stopped) > 0 {
		fmt.Fprintf(b, "Stopped in: %s.\n", strings.Join(stopped, "; "))
	}
	for i := range in.steps {
		if s := &in.steps[i]; s.state == event.StepFailed && !s.interrupted() && s.hint != "" {
			fmt.Fprintf(b, "hint: %s\n", s.hint)
		}
	}
	fmt.Fprintf(b, "gpuctl install resumes where this stopped:\n  %s\n", replay(in.s))
}
