package wizard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/runner"
	"github.com/gpuctl/gpuctl/internal/ui"
)

// preflightStep is the ID under which engine.Install reports its preflight checks.
const preflightStep = "preflight"

// stepInterrupted is the event type of a step stopped by Ctrl-C; its Message is the state the step
// left behind.
const stepInterrupted = event.StepInterrupted

// stepState is what the install screen knows of one step.
type stepState struct {
	id, title string
	kind      plan.Kind
	skip      string
	// state is "" until the step starts, then the last event's type.
	state          event.Type
	started, ended time.Time
	message        string
	err, hint      string
	detail         string
	done, total    int
	pending        []string
}

func (s *stepState) interrupted() bool {
	return s.state == stepInterrupted || (s.state == event.StepFailed && s.err == "interrupted")
}

// event folds one engine event into the steps.
func (m *Model) event(e event.Event) {
	if e.Step == "" {
		switch e.Type {
		case event.Warning:
			msg := e.Message
			if e.Hint != "" {
				msg += " (hint: " + e.Hint + ")"
			}
			m.warnings = append(m.warnings, msg)
		case event.Info:
			m.warnings = append(m.warnings, e.Message)
		}
		return
	}
	i := slices.IndexFunc(m.steps, func(s stepState) bool { return s.id == e.Step })
	if i < 0 {
		m.steps = append(m.steps, stepState{id: e.Step, title: e.Title})
		i = len(m.steps) - 1
	}
	s := &m.steps[i]
	if e.Title != "" {
		s.title = e.Title
	}
	switch e.Type {
	case event.StepStarted:
		s.state, s.started = e.Type, e.Time
	case event.StepProgress:
		s.message, s.done, s.total, s.pending = e.Message, e.Done, e.Total, e.Pending
	default:
		s.state, s.ended = e.Type, e.Time
		if s.started.IsZero() {
			s.started = e.Time
		}
		s.message, s.err, s.hint, s.detail = e.Message, e.Err, e.Hint, e.Detail
	}
}

// duration formats how long a step ran (or has been running).
func (m *Model) duration(s *stepState) string {
	if s.started.IsZero() {
		return ""
	}
	end := s.ended
	if end.IsZero() {
		end = m.cfg.Now()
	}
	d := end.Sub(s.started).Round(time.Second)
	if d < time.Second {
		return "<1s"
	}
	return d.String()
}

// nodeStates are the GPU nodes of a node wait, each validated or still pending.
func (m *Model) nodeStates(s *stepState) (names []string, pending map[string]bool) {
	pending = map[string]bool{}
	for _, n := range s.pending {
		pending[n] = true
	}
	names = slices.Clone(m.review.Plan.GPUNodes)
	for _, n := range s.pending {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, pending
}

func planJSON(p *plan.Plan) (string, error) {
	b, err := json.Marshal(p)
	return string(b), err
}

func writePlan(path string, p *plan.Plan) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	return nil
}

// replay is the command that continues or repeats this install without the wizard.
func (m *Model) replay() string {
	if m.saved != "" {
		return "gpuctl install --config " + quote(m.saved)
	}
	return Command(m.opts, m.cfg.Namespace, m.kubeContext)
}

// summary is the plain text printed once the program has ended: what happened and what to do next.
func (m *Model) summary() string {
	b := &strings.Builder{}
	o := m.outcome
	var ie *runner.InterruptedError
	if errors.As(o.Err, &ie) && ie.BeforeFirstWrite {
		o.Quit = true
	}
	switch {
	case o.Quit:
		fmt.Fprintln(b, "gpuctl wizard stopped before changing anything: nothing was changed.")
		if m.review != nil && m.review.Plan != nil {
			fmt.Fprintf(b, "To install with these choices without the wizard:\n  %s\n", m.replay())
		}
	case o.Err == nil && o.Result != nil:
		_ = ui.PrintInstallResult(b, o.Result, m.cfg.Namespace, ui.Style{TTY: true, Color: m.cfg.Color})
		fmt.Fprintf(b, "  %s   # the same install, e.g. in CI; a re-run changes nothing\n", m.replay())
	case o.Err != nil:
		var done, stopped []string
		for i := range m.steps {
			s := &m.steps[i]
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
		if m.stopping || errors.Is(o.Err, context.Canceled) {
			fmt.Fprintln(b, "The install was interrupted.")
		} else {
			fmt.Fprintf(b, "The install failed: %v\n", o.Err)
		}
		if len(done) > 0 {
			fmt.Fprintf(b, "Finished: %s.\n", strings.Join(done, "; "))
		} else {
			fmt.Fprintln(b, "No step had finished: nothing was changed.")
		}
		if len(stopped) > 0 {
			fmt.Fprintf(b, "Stopped in: %s.\n", strings.Join(stopped, "; "))
		}
		for i := range m.steps {
			if s := &m.steps[i]; s.state == event.StepFailed && !s.interrupted() && s.hint != "" {
				fmt.Fprintf(b, "hint: %s\n", s.hint)
			}
		}
		fmt.Fprintf(b, "gpuctl install resumes where this stopped:\n  %s\n", m.replay())
	}
	return b.String()
}
