package wizard

import (
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// View draws the current screen in the alternate screen buffer.
func (m *Model) View() tea.View {
	v := tea.NewView(m.Render())
	v.AltScreen = true
	v.WindowTitle = "gpuctl wizard"
	return v
}

// Render is the screen as text: a header naming the steps, the body (scrolled to fit), a status
// line and the keys. Tests compare it with golden files.
func (m *Model) Render() string {
	if m.done {
		return ""
	}
	s := m.top()
	body := s.View()
	footer := []string{}
	if status := s.status(); status != "" {
		footer = append(footer, m.env.wrap(status)...)
	}
	footer = append(footer, strings.Split(m.help.View(s.help()), "\n")...)
	p := &pager{}
	if sc, ok := s.(scroller); ok {
		p = sc.pager()
	}
	return m.frame(m.header(s.step()), body, p, footer)
}

// frame lays out the header, as much of the body as fits from the pager's offset (clamping it), a
// rule that says what is scrolled off, and the footer.
func (m *Model) frame(header, body string, p *pager, footer []string) string {
	e := m.env
	avail := e.height - 2 - 1 - len(footer)
	lines := strings.Split(strings.TrimRight(body, "\n"), "\n")
	if f := p.follow; f != nil {
		if f[1] >= p.offset+avail {
			p.offset = f[1] - avail + 1
		}
		p.offset = max(min(p.offset, f[0]), 0)
	}
	p.offset = min(p.offset, max(len(lines)-avail, 0))
	shown := lines[p.offset:min(p.offset+avail, len(lines))]
	out := []string{ansi.Truncate(header, e.width, "…"), e.st.rule.Render(strings.Repeat("─", e.width))}
	for _, l := range shown {
		out = append(out, ansi.Truncate(l, e.width, "…"))
	}
	for i := len(shown); i < avail; i++ {
		out = append(out, "")
	}
	rule := strings.Repeat("─", e.width)
	if below := len(lines) - p.offset - len(shown); below > 0 || p.offset > 0 {
		more := fmt.Sprintf("── %d above · %d below (↑/↓ pgup/pgdn) ", p.offset, below)
		rule = more + strings.Repeat("─", max(e.width-ansi.StringWidth(more), 0))
	}
	out = append(out, e.st.rule.Render(rule))
	for _, l := range footer {
		out = append(out, ansi.Truncate(l, e.width, "…"))
	}
	return strings.Join(out, "\n")
}

func (m *Model) header(current step) string {
	st := m.env.st
	parts := make([]string, len(stepNames))
	for i, n := range stepNames {
		label := fmt.Sprintf("%d %s", i+1, n)
		if step(i) == current {
			label = st.selected.Render("[" + label + "]")
		} else {
			label = st.dim.Render(label)
		}
		parts[i] = label
	}
	return st.title.Render("gpuctl wizard") + "  " + strings.Join(parts, st.dim.Render(" › "))
}
