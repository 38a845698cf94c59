package wizard

import (
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// step is the place of a screen in the wizard's story, named in the header.
type step int

const (
	stepContext step = iota
	stepDetect
	stepChoices
	stepReview
	stepInstall
)

var stepNames = [...]string{"Context", "Detection", "Choices", "Review", "Install"}

// screen is one step of the wizard: a Bubble Tea model of its own over its session. The shell
// routes messages to the screen shown and draws the chrome around what View returns.
type screen interface {
	// Init starts what the screen needs (a detection, a plan, the install).
	Init() tea.Cmd
	// Update handles a message for the screen, changing it in place.
	Update(tea.Msg) tea.Cmd
	// View is the screen's body; the shell scrolls it to fit.
	View() string
	step() step
	session() session
	// help is the keys the screen honours, shown under it.
	help() bindings
	// status is the line above the keys: why the way forward is blocked, or the last notice.
	status() string
}

// scroller is a screen whose body scrolls; the others show its top.
type scroller interface{ pager() *pager }

// typist is a screen that sometimes takes every key as text (so ? is not help).
type typist interface{ typing() bool }

// pager is a screen's scroll position; the shell clamps it to the body it shows. A screen that moves
// a cursor over its body (the choices) sets follow to the cursor's lines, which the shell then keeps
// in view.
type pager struct {
	offset int
	follow *[2]int
}

// key scrolls by a line or a page; it says whether the key was one of its.
func (p *pager) key(e *env, msg tea.KeyPressMsg) bool {
	switch {
	case key.Matches(msg, e.keys.Up):
		p.offset--
	case key.Matches(msg, e.keys.Down):
		p.offset++
	case key.Matches(msg, e.keys.PageUp):
		p.offset -= e.bodyHeight() - 1
	case key.Matches(msg, e.keys.PageDown):
		p.offset += e.bodyHeight() - 1
	default:
		return false
	}
	p.offset = max(p.offset, 0)
	return true
}
