package wizard

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// installScreen runs engine.Install, confirms exactly the Plan the person reviewed and shows each
// step as the engine reports it. Ctrl-C asks before stopping an install that has begun to write.
type installScreen struct {
	s        session
	pg       pager
	run      *installRun
	steps    []stepState
	warnings []string
	notice   string
	// asking is set while the screen asks whether to stop; stopping once the answer was yes.
	asking, stopping bool
	finished         bool
	outcome          Outcome
}

// newInstallScreen lists the reviewed Plan's steps, not started yet.
func newInstallScreen(s session) *installScreen {
	in := &installScreen{s: s, steps: []stepState{{id: preflightStep, title: "Preflight checks"}}}
	for _, st := range s.review.Plan.Steps {
		in.steps = append(in.steps, stepState{id: st.ID, title: st.Title, kind: st.Kind, skip: st.Skip})
	}
	return in
}

func (in *installScreen) step() step       { return stepInstall }
func (in *installScreen) session() session { return in.s }
func (in *installScreen) pager() *pager    { return &in.pg }
func (in *installScreen) status() string   { return in.notice }

func (in *installScreen) help() bindings {
	k := in.s.keys
	switch {
	case in.asking:
		return bindings{hk("y", "stop the install"), hk("n/esc", "keep going")}
	case in.finished && !in.outcome.Confirmed:
		return bindings{hk("esc", "back to review"), hk("enter/q", "exit")}
	case in.finished:
		return bindings{hk("enter/q", "exit"), k.Down, k.Up}
	}
	return bindings{hk("ctrl+c", "stop…"), k.Down, k.Up}
}

// Init starts the install.
func (in *installScreen) Init() tea.Cmd {
	in.run = startRun(in.s, in.getenv())
	return in.run.listen()
}

func (in *installScreen) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case eventMsg:
		in.event(msg.e)
		return in.run.listen()
	case confirmMsg:
		return in.confirm(msg)
	case installDoneMsg:
		return in.done(msg)
	case tea.KeyPressMsg:
		return in.key(msg)
	}
	return nil
}

// getenv hands the engine the typed NGC key as the value of the variable the options name; other
// variables come from the environment.
func (in *installScreen) getenv() func(string) string {
	key, env, base := in.s.choice.NGCKey, in.s.opts.Licensing.NGCAPIKeyEnv, in.s.cfg.Getenv
	return func(name string) string {
		if key != "" && name == env {
			return key
		}
		return base(name)
	}
}

// confirm answers the engine's Confirm: yes exactly when its Plan is the one the person reviewed.
func (in *installScreen) confirm(msg confirmMsg) tea.Cmd {
	same := samePlan(msg.plan, in.s.review.Plan)
	if same && !in.stopping {
		in.outcome.Confirmed = true
		if in.s.cfg.PlanFile != "" {
			if err := writePlan(in.s.cfg.PlanFile, msg.plan); err != nil {
				in.warnings = append(in.warnings, err.Error())
			}
		}
	} else if !same {
		in.notice = markWarn + " the cluster changed since the review: review the new plan"
	}
	msg.reply <- same && !in.stopping
	return in.run.listen()
}

func (in *installScreen) done(msg installDoneMsg) tea.Cmd {
	in.finished, in.asking = true, false
	in.outcome.Result, in.outcome.Err = msg.res, msg.err
	if errors.Is(msg.err, engine.ErrNotConfirmed) && !in.stopping {
		// The Plan changed under the review: review again, in place of the old review.
		s := in.s
		s.review = nil
		r := newReviewScreen(s)
		r.notice = in.notice
		return route(2, r)
	}
	if in.stopping || (!in.outcome.Confirmed && errors.Is(msg.err, context.Canceled)) {
		if !in.outcome.Confirmed {
			in.outcome.Quit = true
		}
		return in.quit()
	}
	return nil
}

func (in *installScreen) quit() tea.Cmd {
	o := in.outcome
	return func() tea.Msg { return quitMsg{o} }
}

// interrupt is Ctrl-C (or q): once the engine goes ahead it asks first, and a second Ctrl-C while
// asking means yes; before that, or when asked and answered, it stops the engine and waits for it
// to say where it stopped.
func (in *installScreen) interrupt() tea.Cmd {
	switch {
	case in.finished:
		return in.quit()
	case in.outcome.Confirmed && !in.asking && !in.stopping:
		in.asking = true
		return nil
	}
	in.asking, in.stopping = false, true
	in.run.cancel()
	return nil
}

func (in *installScreen) key(msg tea.KeyPressMsg) tea.Cmd {
	k := in.s.keys
	if in.asking {
		switch {
		case key.Matches(msg, k.Yes):
			return in.interrupt()
		case key.Matches(msg, k.No):
			in.asking = false
		}
		return nil
	}
	if in.finished {
		switch {
		case key.Matches(msg, k.Back) && !in.outcome.Confirmed:
			return back()
		case key.Matches(msg, k.Next, k.Quit):
			return in.quit()
		}
	}
	if key.Matches(msg, k.Quit) && msg.String() == "q" && !in.finished {
		return in.interrupt()
	}
	in.pg.key(in.s.env, msg)
	return nil
}

// drain stops a running install and folds what it still reports into the screen, until the engine
// has returned.
func (in *installScreen) drain() {
	if in.run == nil {
		return
	}
	if !in.finished {
		in.run.cancel()
	}
	for msg := range in.run.ch {
		switch msg := msg.(type) {
		case eventMsg:
			in.event(msg.e)
		case confirmMsg:
			msg.reply <- false
		case installDoneMsg:
			in.finished = true
			in.outcome.Result, in.outcome.Err = msg.res, msg.err
		}
	}
	<-in.run.ended
}

func (in *installScreen) View() string {
	e := in.s.env
	b := &strings.Builder{}
	b.WriteString(e.st.heading.Render(in.title()) + e.st.dim.Render(" · context "+in.s.kubeContext) + "\n")
	for i := range in.steps {
		in.stepLine(b, &in.steps[i])
	}
	if in.asking {
		b.WriteString("\n")
		e.para(b, "", e.st.warn.Render(markWarn)+" Stop the install? The steps that finished stay done, and gpuctl install resumes from there. [y/N]")
	}
	in.failureLines(b)
	if len(in.warnings) > 0 {
		b.WriteString("\n")
		for _, w := range in.warnings {
			e.para(b, "", e.st.warn.Render(markWarn)+" "+w)
		}
	}
	switch {
	case in.finished && in.outcome.Err == nil && in.outcome.Result != nil:
		b.WriteString("\n" + summary(in.s, in.outcome, in))
		if in.s.saved == "" {
			e.para(b, "", e.st.dim.Render("(Choices not saved: the command above replays them.)"))
		}
	case in.finished && in.outcome.Confirmed:
		b.WriteString("\n")
		e.para(b, "", "gpuctl install resumes where this stopped: "+replay(in.s))
	}
	return b.String()
}

// title says where the install is.
func (in *installScreen) title() string {
	e := in.s.env
	switch {
	case in.finished && in.outcome.Err == nil:
		return e.st.ok.Render(markOK) + " Installed"
	case in.finished && in.outcome.Confirmed:
		return e.st.fail.Render(markFail) + " The install stopped"
	case in.finished:
		return e.st.fail.Render(markFail) + " Nothing was installed"
	case in.stopping:
		return "Stopping at the next safe point…"
	case !in.outcome.Confirmed:
		return e.spin.View() + " Taking the install lock, detecting again, running the preflight checks…"
	}
	return "Installing"
}

// stepLine is one step with its mark, duration and message, and the GPU nodes of a node wait.
func (in *installScreen) stepLine(b *strings.Builder, s *stepState) {
	e := in.s.env
	var mk string
	switch {
	case s.interrupted():
		mk = e.st.warn.Render(markStopped)
	case s.state == event.StepSucceeded:
		mk = e.st.ok.Render(markOK)
	case s.state == event.StepSkipped:
		mk = e.st.dim.Render(markSkip)
	case s.state == event.StepFailed:
		mk = e.st.fail.Render(markFail)
	case s.state == event.StepStarted:
		mk = e.spin.View()
	default:
		mk = e.st.dim.Render(markPending)
	}
	line := fmt.Sprintf("%s %s", mk, s.title)
	if d := in.duration(s); d != "" {
		line += e.st.dim.Render(" " + d)
	}
	msg := s.message
	if s.state == "" && s.skip != "" {
		msg = "will skip: " + s.skip
	}
	if msg != "" {
		line += e.st.dim.Render(" · " + msg)
	}
	b.WriteString(line + "\n")
	if s.state == event.StepStarted && (s.kind == plan.KindWaitValidators || s.kind == plan.KindWaitAllocatable) && s.total > 0 {
		in.nodeLines(b, s)
	}
}

// failureLines are the failed steps with their errors, details and hints.
func (in *installScreen) failureLines(b *strings.Builder) {
	e := in.s.env
	for i := range in.steps {
		s := &in.steps[i]
		if s.state != event.StepFailed || s.interrupted() {
			continue
		}
		b.WriteString("\n" + e.st.fail.Render(markFail+" "+s.title+": ") + "\n")
		if s.err != "" {
			e.para(b, "    ", s.err)
		}
		for _, l := range strings.Split(strings.TrimRight(s.detail, "\n"), "\n") {
			if l != "" {
				b.WriteString("    " + l + "\n")
			}
		}
		if s.hint != "" {
			e.para(b, "    ", "hint: "+s.hint)
		}
	}
}

// nodeLines is the per-GPU-node view of a node wait: each node validated or still waited on.
func (in *installScreen) nodeLines(b *strings.Builder, s *stepState) {
	e := in.s.env
	names, pending := in.nodeStates(s)
	const most = 8
	for i, n := range names {
		if i == most {
			fmt.Fprintf(b, "      … and %d more\n", len(names)-most)
			break
		}
		if pending[n] {
			fmt.Fprintf(b, "      %s %s %s\n", e.spin.View(), n, e.st.dim.Render("waiting"))
		} else {
			fmt.Fprintf(b, "      %s %s %s\n", e.st.ok.Render(markOK), n, e.st.dim.Render("done"))
		}
	}
	if extra := s.total - len(names); extra > 0 {
		fmt.Fprintf(b, "      %d more GPU nodes NFD found\n", extra)
	}
}
