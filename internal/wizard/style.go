package wizard

import (
	"charm.land/bubbles/v2/help"
	"charm.land/lipgloss/v2"
)

// styles are the looks of the wizard's text; without colour (NO_COLOR, https://no-color.org) every
// style is plain and only the symbols remain.
type styles struct {
	color                                  bool
	title, heading, dim, ok, warn, fail    lipgloss.Style
	selected, cursor, key, value, rule, em lipgloss.Style
}

func newStyles(color bool) styles {
	if !color {
		p := lipgloss.NewStyle()
		return styles{title: p, heading: p, dim: p, ok: p, warn: p, fail: p, selected: p, cursor: p, key: p, value: p, rule: p, em: p}
	}
	return styles{
		color:    true,
		title:    lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("#76B900")),
		heading:  lipgloss.NewStyle().Bold(true),
		dim:      lipgloss.NewStyle().Faint(true),
		ok:       lipgloss.NewStyle().Foreground(lipgloss.Color("2")),
		warn:     lipgloss.NewStyle().Foreground(lipgloss.Color("3")),
		fail:     lipgloss.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
		selected: lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("#76B900")),
		cursor:   lipgloss.NewStyle().Foreground(lipgloss.Color("#76B900")),
		key:      lipgloss.NewStyle().Bold(true),
		value:    lipgloss.NewStyle().Foreground(lipgloss.Color("6")),
		rule:     lipgloss.NewStyle().Faint(true),
		em:       lipgloss.NewStyle().Bold(true),
	}
}

// Marks: the same symbols as gpuctl's progress output on a terminal.
const (
	markOK      = "✔"
	markWarn    = "‼"
	markFail    = "×"
	markSkip    = "–"
	markPending = "·"
	markStopped = "■"
)

func (s styles) helpStyles() help.Styles {
	if !s.color {
		p := lipgloss.NewStyle()
		return help.Styles{ShortKey: p, ShortDesc: p, ShortSeparator: p, Ellipsis: p, FullKey: p, FullDesc: p, FullSeparator: p}
	}
	return help.DefaultDarkStyles()
}
