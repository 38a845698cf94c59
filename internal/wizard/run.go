package wizard

import (
	"context"
	"errors"
	"io"

	tea "charm.land/bubbletea/v2"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// Run runs the wizard on a terminal (in, out) until the person leaves or the install ends, and
// returns how it ended. A running install is always waited for, so its lock is released before Run
// returns.
func Run(ctx context.Context, cfg Config, in io.Reader, out io.Writer) (Outcome, error) {
	m, err := New(ctx, cfg)
	if err != nil {
		return Outcome{}, err
	}
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out))
	_, err = p.Run()
	m.drain()
	if !m.done {
		m.abandon()
	}
	if err != nil && !errors.Is(err, tea.ErrProgramKilled) && !errors.Is(err, context.Canceled) {
		return m.outcome, err
	}
	return m.outcome, nil
}

// drain waits for a running install to end (see installScreen.drain).
func (m *Model) drain() {
	if in, ok := m.top().(*installScreen); ok {
		in.drain()
	}
}

// abandon ends a wizard killed from outside (a signal cancelled ctx), saying what was done all the
// same.
func (m *Model) abandon() {
	o := Outcome{Quit: true, Err: context.Canceled}
	if in, ok := m.top().(*installScreen); ok {
		o = in.outcome
		if o.Err == nil && o.Result == nil {
			o.Err, o.Quit = context.Canceled, !o.Confirmed
		}
		in.stopping = o.Confirmed
	}
	m.quit(o)
}

// installRun is one engine.Install running in its own goroutine; its events, its Confirm call and its
// end arrive as messages on ch.
type installRun struct {
	ch     chan tea.Msg
	cancel context.CancelFunc
	// ended is closed when engine.Install has returned (the lock is released by then).
	ended chan struct{}
}

// Messages from a running install.
type (
	eventMsg   struct{ e event.Event }
	confirmMsg struct {
		plan  *plan.Plan
		reply chan<- bool
	}
	installDoneMsg struct {
		res *engine.InstallResult
		err error
	}
)

// startRun starts engine.Install for the session's context and options.
func startRun(s session, getenv func(string) string) *installRun {
	ctx, cancel := context.WithCancel(s.ctx)
	r := &installRun{ch: make(chan tea.Msg, 64), cancel: cancel, ended: make(chan struct{})}
	b, kc, o := s.cfg.Backend, s.kubeContext, s.opts
	go func() {
		defer close(r.ended)
		send := func(msg tea.Msg) { r.ch <- msg }
		sink := event.SinkFunc(func(e event.Event) { send(eventMsg{e}) })
		confirm := func(p *plan.Plan) bool {
			reply := make(chan bool, 1)
			send(confirmMsg{p, reply})
			select {
			case ok := <-reply:
				return ok
			case <-ctx.Done():
				return false
			}
		}
		res, err := b.Install(ctx, kc, o, sink, confirm, getenv)
		send(installDoneMsg{res, err})
		close(r.ch)
	}()
	return r
}

// listen waits for the run's next message.
func (r *installRun) listen() tea.Cmd {
	if r == nil {
		return nil
	}
	return func() tea.Msg {
		msg, ok := <-r.ch
		if !ok {
			return nil
		}
		return msg
	}
}
