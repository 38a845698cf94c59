package wizard

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"charm.land/bubbles/v2/filepicker"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/ui"
)

// choicesScreen asks what gpuctl cannot detect, with the detected answers preselected. A text field
// may open a file picker over the screen.
type choicesScreen struct {
	s      session
	fields []field
	sel    int
	picker *filepicker.Model
	pg     pager
}

// pager keeps the selected question and its help in view (View writes a heading and a blank line,
// then two lines a question).
func (c *choicesScreen) pager() *pager {
	if c.picker != nil {
		return &pager{}
	}
	c.pg.follow = &[2]int{2 + 2*c.sel, 3 + 2*c.sel}
	return &c.pg
}

// newChoicesScreen asks the questions with the answers detection suggests.
func newChoicesScreen(s session) *choicesScreen {
	c := initialChoices(s.cfg.Base, s.detected, hostDriver(s.check), s.profiles)
	return &choicesScreen{s: s, fields: buildFields(s.st, s.profiles, s.bundles, s.detected, c, nil)}
}

func (c *choicesScreen) Init() tea.Cmd    { return nil }
func (c *choicesScreen) step() step       { return stepChoices }
func (c *choicesScreen) session() session { return c.s }
func (c *choicesScreen) status() string   { return "" }
func (c *choicesScreen) typing() bool     { return c.picker != nil || c.text() }
func (c *choicesScreen) field() *field    { return &c.fields[c.sel] }
func (c *choicesScreen) text() bool       { return c.sel < len(c.fields) && c.field().kind != kindSelect }
func (c *choicesScreen) answers() choices { return choicesFrom(c.fields) }

func (c *choicesScreen) help() bindings {
	switch {
	case c.picker != nil:
		return bindings{hk("↑/↓", "move"), hk("enter", "choose"), hk("←/→", "folder up/in"), hk("esc", "cancel")}
	case c.text():
		return bindings{hk("↑/↓/tab", "move"), hk("type", "edit"), hk("ctrl+o", "browse"), hk("enter", "review"), hk("esc", "back"), hk("ctrl+c", "quit"), c.s.keys.Help}
	}
	return bindings{hk("↑/↓", "move"), hk("←/→", "change"), hk("enter", "review"), hk("esc", "back"), c.s.keys.Quit, c.s.keys.Help}
}

func (c *choicesScreen) Update(msg tea.Msg) tea.Cmd {
	if _, ok := msg.(tea.WindowSizeMsg); ok {
		// The shell keeps the size; an open picker takes the height it leaves.
		if c.picker != nil {
			c.picker.SetHeight(c.s.bodyHeight() - 3)
		}
		return nil
	}
	if c.picker != nil {
		return c.pickerUpdate(msg)
	}
	if k, ok := msg.(tea.KeyPressMsg); ok {
		return c.key(k)
	}
	if c.text() {
		var cmd tea.Cmd
		f := c.field()
		f.input, cmd = f.input.Update(msg)
		return cmd
	}
	return nil
}

func (c *choicesScreen) key(msg tea.KeyPressMsg) tea.Cmd {
	f := c.field()
	text := f.kind != kindSelect
	switch s := msg.String(); {
	case s == "up" || s == "shift+tab" || (!text && s == "k"):
		return c.move(-1)
	case s == "down" || s == "tab" || (!text && s == "j"):
		return c.move(1)
	case s == "esc" || (!text && s == "b"):
		f.input.Blur()
		return back()
	case s == "enter":
		f.input.Blur()
		next := c.s
		next.choice = c.answers()
		next.opts = options(c.s.cfg.Base, c.s.detected, c.s.profiles, next.choice)
		return forward(newReviewScreen(next))
	case !text && key.Matches(msg, c.s.keys.Quit):
		return interrupt
	case !text && key.Matches(msg, c.s.keys.Left, c.s.keys.Right):
		c.change(key.Matches(msg, c.s.keys.Left))
		return nil
	case f.kind == kindFile && s == "ctrl+o":
		return c.openPicker()
	}
	if text {
		var cmd tea.Cmd
		f.input, cmd = f.input.Update(msg)
		return cmd
	}
	return nil
}

// move goes to the question d away, focusing it when it is text.
func (c *choicesScreen) move(d int) tea.Cmd {
	c.field().input.Blur()
	c.sel = (c.sel + d + len(c.fields)) % len(c.fields)
	if nf := c.field(); nf.kind != kindSelect {
		return nf.input.Focus()
	}
	return nil
}

// change picks the previous or next option; a new profile changes the questions.
func (c *choicesScreen) change(previous bool) {
	f := c.field()
	d := 1
	if previous {
		d = -1
	}
	if n := len(f.options); n > 0 {
		f.sel = (f.sel + d + n) % n
	}
	if f.id == fieldProfile {
		ch := c.answers()
		ch.Driver = initialChoices(engine.InstallOptions{Profile: ch.Profile}, ch.Profile, hostDriver(c.s.check), c.s.profiles).Driver
		c.fields = buildFields(c.s.st, c.s.profiles, c.s.bundles, c.s.detected, ch, c.fields)
	}
}

func (c *choicesScreen) openPicker() tea.Cmd {
	fp := filepicker.New()
	dir := c.s.cfg.WorkDir
	if cur := c.field().value(); cur != "" {
		dir = filepath.Dir(cur)
	}
	if dir == "" {
		dir, _ = os.Getwd()
	}
	fp.CurrentDirectory = dir
	fp.ShowPermissions, fp.ShowSize = false, true
	fp.SetHeight(max(c.s.bodyHeight()-3, 3))
	c.picker = &fp
	return fp.Init()
}

func (c *choicesScreen) pickerUpdate(msg tea.Msg) tea.Cmd {
	if k, ok := msg.(tea.KeyPressMsg); ok && (k.String() == "esc" || k.String() == "q") {
		c.picker = nil
		return nil
	}
	fp, cmd := c.picker.Update(msg)
	c.picker = &fp
	if ok, path := fp.DidSelectFile(msg); ok {
		c.field().input.SetValue(path)
		c.picker = nil
	}
	return cmd
}

func (c *choicesScreen) View() string {
	st := c.s.st
	b := &strings.Builder{}
	if c.picker != nil {
		b.WriteString(st.heading.Render("Choose the "+c.field().label+" file") + "\n")
		b.WriteString(st.dim.Render(c.picker.CurrentDirectory) + "\n\n")
		b.WriteString(c.picker.View())
		return b.String()
	}
	b.WriteString(st.heading.Render("Your choices") + st.dim.Render(" — the detected answers are preselected") + "\n\n")
	for i := range c.fields {
		f := &c.fields[i]
		cur := "  "
		label := fmt.Sprintf("%-22s", f.label)
		if i == c.sel {
			cur = st.cursor.Render("› ")
			label = st.selected.Render(label)
		}
		b.WriteString(cur + label + c.fieldValue(f, i == c.sel) + "\n")
		b.WriteString("    " + st.dim.Render(f.help) + "\n")
	}
	return b.String()
}

// fieldValue is a question's answer as shown: the option chosen, the text being edited, or a
// secret masked.
func (c *choicesScreen) fieldValue(f *field, selected bool) string {
	st := c.s.st
	switch {
	case f.kind == kindSelect:
		val := ""
		if f.sel < len(f.options) {
			val = st.value.Render("‹ " + f.options[f.sel].label + " ›")
		}
		if len(f.options) > 1 {
			val += st.dim.Render(fmt.Sprintf(" %d/%d", f.sel+1, len(f.options)))
		}
		return val
	case selected:
		return f.input.View()
	case f.kind == kindSecret && f.input.Value() != "":
		return strings.Repeat("•", 8)
	}
	return ui.OrNone(f.input.Value(), "-")
}
