package wizard

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/plan"
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
func (in *installScreen) event(e event.Event) {
	if e.Step == "" {
		switch e.Type {
		case event.Warning:
			msg := e.Message
			if e.Hint != "" {
				msg += " (hint: " + e.Hint + ")"
			}
			in.warnings = append(in.warnings, msg)
		case event.Info:
			in.warnings = append(in.warnings, e.Message)
		}
		return
	}
	i := slices.IndexFunc(in.steps, func(s stepState) bool { return s.id == e.Step })
	if i < 0 {
		in.steps = append(in.steps, stepState{id: e.Step, title: e.Title})
		i = len(in.steps) - 1
	}
	s := &in.steps[i]
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
func (in *installScreen) duration(s *stepState) string {
	if s.started.IsZero() {
		return ""
	}
	end := s.ended
	if end.IsZero() {
		end = in.s.cfg.Now()
	}
	d := end.Sub(s.started).Round(time.Second)
	if d < time.Second {
		return "<1s"
	}
	return d.String()
}

// nodeStates are the GPU nodes of a node wait, each validated or still pending.
func (in *installScreen) nodeStates(s *stepState) (names []string, pending map[string]bool) {
	pending = map[string]bool{}
	for _, n := range s.pending {
		pending[n] = true
	}
	names = slices.Clone(in.s.review.Plan.GPUNodes)
	for _, n := range s.pending {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, pending
}

func samePlan(a, b *plan.Plan) bool {
	ja, err1 := planJSON(a)
	jb, err2 := planJSON(b)
	return err1 == nil && err2 == nil && ja == jb
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
