package wizard

import (
	"context"
	"errors"
	"io"

	tea "charm.land/bubbletea/v2"
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
		// Killed from outside (a signal cancelled ctx): say what was done all the same.
		if m.outcome.Err == nil && m.outcome.Result == nil {
			m.outcome.Err = context.Canceled
			m.outcome.Quit = !m.outcome.Confirmed
		}
		m.stopping = m.outcome.Confirmed
		m.quit()
	}
	if err != nil && !errors.Is(err, tea.ErrProgramKilled) && !errors.Is(err, context.Canceled) {
		return m.outcome, err
	}
	return m.outcome, nil
}

// drain stops a running install and folds what it still reports into the model, until the engine
// has returned.
func (m *Model) drain() {
	if m.run == nil {
		return
	}
	if !m.finished {
		m.run.cancel()
	}
	for msg := range m.run.ch {
		switch msg := msg.(type) {
		case eventMsg:
			m.event(msg.e)
		case confirmMsg:
			msg.reply <- false
		case installDoneMsg:
			m.finished = true
			m.outcome.Result, m.outcome.Err = msg.res, msg.err
		}
	}
	<-m.run.ended
}
