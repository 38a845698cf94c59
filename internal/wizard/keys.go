package wizard

import "charm.land/bubbles/v2/key"

// keyMap holds every binding; each screen shows the ones it honours.
type keyMap struct {
	Up, Down, Left, Right, Next, Back, Save, Recheck, Help, Quit, Yes, No, PageUp, PageDown key.Binding
}

func newKeyMap() keyMap {
	return keyMap{
		Up:       key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:     key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		Left:     key.NewBinding(key.WithKeys("left", "h"), key.WithHelp("←/h", "previous choice")),
		Right:    key.NewBinding(key.WithKeys("right", "l", "space"), key.WithHelp("→/l/space", "next choice")),
		Next:     key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "continue")),
		Back:     key.NewBinding(key.WithKeys("esc", "b"), key.WithHelp("esc/b", "back")),
		Save:     key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "save config")),
		Recheck:  key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "detect again")),
		Help:     key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "more keys")),
		Quit:     key.NewBinding(key.WithKeys("ctrl+c", "q"), key.WithHelp("q/ctrl+c", "quit")),
		Yes:      key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "yes")),
		No:       key.NewBinding(key.WithKeys("n", "esc"), key.WithHelp("n/esc", "no")),
		PageUp:   key.NewBinding(key.WithKeys("pgup", "ctrl+u"), key.WithHelp("pgup", "page up")),
		PageDown: key.NewBinding(key.WithKeys("pgdown", "ctrl+d"), key.WithHelp("pgdn", "page down")),
	}
}

// bindings is one screen's help: the short line shows the first few, ? shows them all.
type bindings []key.Binding

func (b bindings) ShortHelp() []key.Binding { return b }
func (b bindings) FullHelp() [][]key.Binding {
	var cols [][]key.Binding
	for i := 0; i < len(b); i += 4 {
		cols = append(cols, b[i:min(i+4, len(b))])
	}
	return cols
}

// hk is a binding shown in help only (the screen handles the keys itself).
func hk(keys, desc string) key.Binding {
	return key.NewBinding(key.WithKeys(keys), key.WithHelp(keys, desc))
}
