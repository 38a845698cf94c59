package wizard

import (
	"context"
	"strings"

	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/profile"
)

// env is what every screen shares and nothing resets: the wizard's inputs, its looks, and the window
// and spinner the shell keeps up to date.
type env struct {
	cfg      Config
	ctx      context.Context
	st       styles
	keys     keyMap
	profiles []profile.Profile
	bundles  []bundle.Bundle
	width    int
	height   int
	spin     spinner.Model
}

// session is what a screen knows of the wizard so far: the shared env and the answers of the screens
// before it. Each screen holds its own copy, and moving forward hands the next screen a copy with
// this screen's answer added; so going back leaves nothing of the later screens behind.
type session struct {
	*env
	// kubeContext is the context chosen on the first screen.
	kubeContext string
	// check is what detection found (engine.Check with the base options).
	check *engine.CheckResult
	// detected is the profile gpuctl chooses by itself.
	detected string
	// choice and opts are the person's answers and the install options made of them.
	choice choices
	opts   engine.InstallOptions
	// review is the Plan and preflight checked with opts: what the install must confirm.
	review *engine.CheckResult
	// saved is the config file saved for opts, if any.
	saved string
}

// bodyHeight is about how many lines of a screen's body fit between the chrome.
func (e *env) bodyHeight() int { return max(e.height-5, 3) }

// wrap breaks text to the screen's width.
func (e *env) wrap(text string) []string {
	return strings.Split(ansi.Wrap(text, e.width, " "), "\n")
}

// para writes text wrapped to the screen's width, each line indented.
func (e *env) para(b *strings.Builder, indent, text string) {
	for _, l := range strings.Split(ansi.Wrap(text, max(e.width-len(indent), 20), " ,"), "\n") {
		b.WriteString(indent + l + "\n")
	}
}

// Navigation and ending, asked for by a screen and done by the shell.
type (
	// routeMsg pops back screens off the stack, then pushes next (when not nil) and starts it.
	routeMsg struct {
		back int
		next screen
	}
	// interruptMsg is q or Ctrl-C: the shell decides what it means on the screen shown.
	interruptMsg struct{}
	// quitMsg ends the wizard with the install's outcome.
	quitMsg struct{ outcome Outcome }
)

func route(back int, next screen) tea.Cmd {
	return func() tea.Msg { return routeMsg{back: back, next: next} }
}

func forward(next screen) tea.Cmd { return route(0, next) }

func back() tea.Cmd { return route(1, nil) }

func interrupt() tea.Msg { return interruptMsg{} }

// request tells an answer to the question a screen asked last from one it no longer waits for: a
// screen keeps the pointer of its last request and drops answers to any other. (Not an empty struct,
// whose pointers Go may make equal.)
type request struct{ _ byte }

// checkedMsg is engine.Check's answer to the request of a detection or a review.
type checkedMsg struct {
	req *request
	res *engine.CheckResult
	err error
}

// checkCmd runs engine.Check for the session's context with o.
func checkCmd(s session, req *request, o engine.InstallOptions) tea.Cmd {
	b, ctx, kc := s.cfg.Backend, s.ctx, s.kubeContext
	return func() tea.Msg {
		res, err := b.Check(ctx, kc, o)
		return checkedMsg{req: req, res: res, err: err}
	}
}
