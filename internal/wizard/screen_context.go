package wizard

import (
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// contextScreen asks which kube context to install into.
type contextScreen struct {
	s        session
	contexts []KubeContext
	sel      int
	err      error
}

// contextsMsg is the kubeconfig's contexts, read by Init.
type contextsMsg struct {
	contexts []KubeContext
	current  string
	err      error
}

func newContextScreen(s session) *contextScreen { return &contextScreen{s: s} }

func (c *contextScreen) step() step       { return stepContext }
func (c *contextScreen) session() session { return c.s }
func (c *contextScreen) status() string   { return "" }

func (c *contextScreen) help() bindings {
	k := c.s.keys
	return bindings{k.Up, k.Down, k.Next, k.Quit, k.Help}
}

// Init reads the kubeconfig's contexts.
func (c *contextScreen) Init() tea.Cmd {
	b := c.s.cfg.Backend
	return func() tea.Msg {
		cs, cur, err := b.Contexts()
		return contextsMsg{cs, cur, err}
	}
}

func (c *contextScreen) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case contextsMsg:
		c.contexts, c.err = msg.contexts, msg.err
		want := c.s.cfg.Context
		if want == "" {
			want = msg.current
		}
		for i, kc := range c.contexts {
			if kc.Name == want {
				c.sel = i
			}
		}
	case tea.KeyPressMsg:
		return c.key(msg)
	}
	return nil
}

func (c *contextScreen) key(msg tea.KeyPressMsg) tea.Cmd {
	k := c.s.keys
	switch {
	case key.Matches(msg, k.Quit):
		return interrupt
	case key.Matches(msg, k.Up):
		c.sel = max(c.sel-1, 0)
	case key.Matches(msg, k.Down):
		c.sel = min(c.sel+1, max(len(c.contexts)-1, 0))
	case key.Matches(msg, k.Next):
		if len(c.contexts) == 0 {
			return nil
		}
		next := c.s
		next.kubeContext = c.contexts[c.sel].Name
		return forward(newDetectScreen(next))
	}
	return nil
}

func (c *contextScreen) View() string {
	e := c.s.env
	b := &strings.Builder{}
	b.WriteString(e.st.heading.Render("Which cluster?") + "\n")
	e.para(b, "", "gpuctl installs into the cluster of the kube context you pick. Nothing changes until you confirm the plan.")
	b.WriteString("\n")
	switch {
	case c.err != nil:
		e.para(b, "", e.st.fail.Render(markFail)+" cannot read the kubeconfig: "+c.err.Error())
		return b.String()
	case c.contexts == nil:
		b.WriteString(e.spin.View() + " reading the kubeconfig…\n")
		return b.String()
	case len(c.contexts) == 0:
		e.para(b, "", e.st.fail.Render(markFail)+" the kubeconfig has no contexts: set KUBECONFIG or pass --kubeconfig")
		return b.String()
	}
	rows := [][]string{{"  CONTEXT", "CLUSTER", "USER", "NAMESPACE"}}
	for i, kc := range c.contexts {
		cur := "  "
		if i == c.sel {
			cur = "› "
		}
		rows = append(rows, []string{cur + kc.Name, kc.Cluster, kc.User, kc.Namespace})
	}
	for i, l := range table(rows) {
		if i == c.sel+1 {
			l = e.st.selected.Render(l)
		} else if i == 0 {
			l = e.st.dim.Render(l)
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}
