package wizard

import (
	"context"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/profile"
)

// Config is what the wizard starts from.
type Config struct {
	Backend Backend
	// Base are the install options the command line gave (flags, GPUCTL_* variables, config file);
	// the choices are made on top of them.
	Base engine.InstallOptions
	// Namespace is the namespace gpuctl installs into (-n).
	Namespace string
	// Context preselects a kube context ("" = the kubeconfig's current one).
	Context string
	// Color allows ANSI colours (false under NO_COLOR).
	Color bool
	// Getenv reads the environment (the NGC key's variable when none was typed).
	Getenv func(string) string
	// SavePath is where s saves the config file.
	SavePath string
	// PlanFile, when set, receives the confirmed Plan as JSON (what install --dry-run -o json prints).
	PlanFile string
	// Now is the clock (time.Now when nil); tests fix it.
	Now func() time.Time
	// WorkDir is where the file picker starts (the current directory when empty).
	WorkDir string
}

// Outcome is how the wizard ended.
type Outcome struct {
	// Result and Err are what engine.Install returned (nil when no install ran).
	Result *engine.InstallResult
	Err    error
	// Quit is set when the person left before confirming: nothing was changed.
	Quit bool
	// Confirmed is set once the person confirmed the Plan and the engine went ahead.
	Confirmed bool
	// Options and Context are the choices the install ran with.
	Options engine.InstallOptions
	Context string
	// Saved is the config file saved for these choices, if any.
	Saved string
	// Summary is the plain text to print after the program ends.
	Summary string
}

// Model is the wizard's Bubble Tea model: the shell. It keeps the window size, the help and the
// spinner, routes each message to the screen shown and draws the chrome around it. The screens are
// a stack: moving forward pushes a new screen, going back pops.
type Model struct {
	env     *env
	help    help.Model
	screens []screen
	outcome Outcome
	done    bool
}

// New returns the wizard's model. ctx bounds every call to the cluster.
func New(ctx context.Context, cfg Config) (*Model, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Getenv == nil {
		cfg.Getenv = func(string) string { return "" }
	}
	if cfg.Namespace == "" {
		cfg.Namespace = plan.DefaultNamespace
	}
	if cfg.Base.Timeout == 0 {
		cfg.Base.Timeout = plan.DefaultTimeout
	}
	profiles, err := profile.List()
	if err != nil {
		return nil, err
	}
	e := &env{cfg: cfg, ctx: ctx, st: newStyles(cfg.Color), keys: newKeyMap(), profiles: profiles, bundles: bundle.List(),
		width: 80, height: 24, spin: spinner.New(spinner.WithSpinner(spinner.MiniDot))}
	h := help.New()
	h.Styles = e.st.helpStyles()
	return &Model{env: e, help: h, screens: []screen{newContextScreen(session{env: e})}}, nil
}

// Outcome is how the wizard ended (valid once the program has quit).
func (m *Model) Outcome() Outcome { return m.outcome }

func (m *Model) top() screen { return m.screens[len(m.screens)-1] }

// Init starts the first screen and the spinner.
func (m *Model) Init() tea.Cmd { return tea.Batch(m.top().Init(), m.env.spin.Tick) }

// Update handles what belongs to the shell and hands everything else to the screen shown.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.env.width, m.env.height = max(msg.Width, 40), max(msg.Height, 10)
		m.help.SetWidth(m.env.width)
	case spinner.TickMsg:
		var cmd tea.Cmd
		m.env.spin, cmd = m.env.spin.Update(msg)
		return m, cmd
	case routeMsg:
		return m, m.route(msg)
	case interruptMsg, tea.InterruptMsg:
		return m, m.interrupt()
	case quitMsg:
		return m, m.quit(msg.outcome)
	case tea.KeyPressMsg:
		if msg.String() == "ctrl+c" {
			return m, m.interrupt()
		}
		if t, ok := m.top().(typist); !(ok && t.typing()) && key.Matches(msg, m.env.keys.Help) {
			m.help.ShowAll = !m.help.ShowAll
			return m, nil
		}
	}
	return m, m.top().Update(msg)
}

// route goes back and forward; a screen shown again starts at its top.
func (m *Model) route(r routeMsg) tea.Cmd {
	m.screens = m.screens[:max(len(m.screens)-r.back, 1)]
	if r.next == nil {
		if s, ok := m.top().(scroller); ok {
			s.pager().offset = 0
		}
		return nil
	}
	m.screens = append(m.screens, r.next)
	return r.next.Init()
}

// interrupt is q or Ctrl-C: before the install it leaves with nothing changed; the install screen
// decides for itself.
func (m *Model) interrupt() tea.Cmd {
	if in, ok := m.top().(*installScreen); ok {
		return in.interrupt()
	}
	return m.quit(Outcome{Quit: true, Err: context.Canceled})
}

// quit ends the wizard with o, completed from the session shown.
func (m *Model) quit(o Outcome) tea.Cmd {
	s := m.top().session()
	o.Options, o.Context, o.Saved = s.opts, s.kubeContext, s.saved
	in, _ := m.top().(*installScreen)
	o.Summary = summary(s, o, in)
	m.outcome, m.done = o, true
	return tea.Quit
}
