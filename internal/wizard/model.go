package wizard

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"charm.land/bubbles/v2/filepicker"
	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/profile"
	"github.com/gpuctl/gpuctl/internal/render"
)

// screen is one step of the wizard.
type screen int

const (
	screenContext screen = iota
	screenDetect
	screenChoices
	screenReview
	screenInstall
)

var screenNames = [...]string{"Context", "Detection", "Choices", "Review", "Install"}

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
	// Saved is the config file saved, if any.
	Saved string
	// Summary is the plain text to print after the program ends.
	Summary string
}

// Model is the wizard's Bubble Tea model.
type Model struct {
	cfg    Config
	ctx    context.Context
	keys   keyMap
	help   help.Model
	spin   spinner.Model
	st     styles
	width  int
	height int
	screen screen
	scroll int
	notice string

	profiles []profile.Profile
	bundles  []bundle.Bundle

	contexts    []KubeContext
	ctxSel      int
	ctxErr      error
	kubeContext string

	detecting bool
	seq       int
	check     *engine.CheckResult
	checkErr  error

	fields   []field
	fieldSel int
	detected string
	picker   *filepicker.Model

	reviewing bool
	review    *engine.CheckResult
	// values are the review's value lines per release step (computed once per review).
	values    map[string][]string
	reviewErr error
	opts      engine.InstallOptions
	choice    choices
	saved     string

	run      *installRun
	steps    []stepState
	warnings []string
	asking   bool
	stopping bool
	finished bool

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
		cfg.Namespace = engine.DefaultNamespace
	}
	if cfg.Base.Timeout == 0 {
		cfg.Base.Timeout = engine.DefaultInstallTimeout
	}
	profiles, err := profile.List()
	if err != nil {
		return nil, err
	}
	st := newStyles(cfg.Color)
	h := help.New()
	h.Styles = st.helpStyles()
	sp := spinner.New(spinner.WithSpinner(spinner.MiniDot))
	return &Model{cfg: cfg, ctx: ctx, keys: newKeyMap(), help: h, spin: sp, st: st, width: 80, height: 24,
		profiles: profiles, bundles: bundle.List()}, nil
}

// Outcome is how the wizard ended (valid once the program has quit).
func (m *Model) Outcome() Outcome { return m.outcome }

// Messages from the wizard's commands.
type (
	contextsMsg struct {
		contexts []KubeContext
		current  string
		err      error
	}
	checkedMsg struct {
		seq    int
		review bool
		res    *engine.CheckResult
		err    error
	}
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

// Init lists the contexts and starts the spinner.
func (m *Model) Init() tea.Cmd {
	b := m.cfg.Backend
	return tea.Batch(func() tea.Msg {
		cs, cur, err := b.Contexts()
		return contextsMsg{cs, cur, err}
	}, m.spin.Tick)
}

// Update handles one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = max(msg.Width, 40), max(msg.Height, 10)
		m.help.SetWidth(m.width)
		if m.picker != nil {
			m.picker.SetHeight(m.bodyHeight() - 3)
		}
		return m, nil
	case spinner.TickMsg:
		var cmd tea.Cmd
		m.spin, cmd = m.spin.Update(msg)
		return m, cmd
	case contextsMsg:
		m.contexts, m.ctxErr = msg.contexts, msg.err
		want := m.cfg.Context
		if want == "" {
			want = msg.current
		}
		for i, c := range m.contexts {
			if c.Name == want {
				m.ctxSel = i
			}
		}
		return m, nil
	case checkedMsg:
		if msg.seq != m.seq {
			return m, nil // an answer to a question no longer asked
		}
		if msg.review {
			m.reviewing, m.review, m.reviewErr = false, msg.res, msg.err
			m.values = reviewValues(msg.res)
		} else {
			m.detecting, m.check, m.checkErr = false, msg.res, msg.err
		}
		return m, nil
	case eventMsg:
		m.event(msg.e)
		return m, m.run.listen()
	case confirmMsg:
		return m, m.confirm(msg)
	case installDoneMsg:
		return m, m.installDone(msg)
	case tea.InterruptMsg:
		return m, m.interrupt()
	case tea.KeyPressMsg:
		if msg.String() == "ctrl+c" {
			return m, m.interrupt()
		}
		if m.picker != nil {
			return m, m.pickerUpdate(msg)
		}
		if !m.typing() && key.Matches(msg, m.keys.Help) {
			m.help.ShowAll = !m.help.ShowAll
			return m, nil
		}
		switch m.screen {
		case screenContext:
			return m, m.contextKey(msg)
		case screenDetect:
			return m, m.detectKey(msg)
		case screenChoices:
			return m, m.choicesKey(msg)
		case screenReview:
			return m, m.reviewKey(msg)
		case screenInstall:
			return m, m.installKey(msg)
		}
	}
	if m.picker != nil {
		return m, m.pickerUpdate(msg)
	}
	if m.screen == screenChoices && m.typing() {
		var cmd tea.Cmd
		f := &m.fields[m.fieldSel]
		f.input, cmd = f.input.Update(msg)
		return m, cmd
	}
	return m, nil
}

// interrupt is Ctrl-C: before the first write it leaves with nothing changed; during the install it
// asks first, and a second Ctrl-C while asking means yes.
func (m *Model) interrupt() tea.Cmd {
	switch {
	case m.screen == screenInstall && m.finished:
		return m.quit()
	case m.screen == screenInstall && m.outcome.Confirmed && !m.asking && !m.stopping:
		m.asking = true
		return nil
	case m.screen == screenInstall && m.run != nil:
		// Asked and answered, or the engine has not reached the first write: stop it and wait for
		// it to say where it stopped.
		m.asking, m.stopping = false, true
		m.run.cancel()
		return nil
	}
	m.outcome.Quit = true
	m.outcome.Err = context.Canceled
	return m.quit()
}

func (m *Model) quit() tea.Cmd {
	m.done = true
	m.outcome.Options, m.outcome.Context, m.outcome.Saved = m.opts, m.kubeContext, m.saved
	m.outcome.Summary = m.summary()
	return tea.Quit
}

// typing is true while a text field has the keyboard.
func (m *Model) typing() bool {
	return m.screen == screenChoices && m.fieldSel < len(m.fields) && m.fields[m.fieldSel].kind != kindSelect
}

func (m *Model) contextKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case key.Matches(msg, m.keys.Quit):
		return m.interrupt()
	case key.Matches(msg, m.keys.Up):
		m.ctxSel = max(m.ctxSel-1, 0)
	case key.Matches(msg, m.keys.Down):
		m.ctxSel = min(m.ctxSel+1, max(len(m.contexts)-1, 0))
	case key.Matches(msg, m.keys.Next):
		if len(m.contexts) == 0 {
			return nil
		}
		chosen := m.contexts[m.ctxSel].Name
		if chosen != m.kubeContext {
			m.fields, m.check, m.checkErr, m.review = nil, nil, nil, nil
		}
		m.kubeContext = chosen
		m.screen, m.scroll = screenDetect, 0
		if m.check == nil {
			return m.startDetect()
		}
	}
	return nil
}

func (m *Model) startDetect() tea.Cmd {
	m.seq++
	m.detecting, m.check, m.checkErr = true, nil, nil
	seq, b, kc, o := m.seq, m.cfg.Backend, m.kubeContext, m.cfg.Base
	ctx := m.ctx
	return func() tea.Msg {
		res, err := b.Check(ctx, kc, o)
		return checkedMsg{seq: seq, res: res, err: err}
	}
}

// choiceFixable are failed checks a choice on the next screen can resolve: the driver's source, and
// a plan that needs the NVIDIA AI Enterprise inputs.
func choiceFixable(id, message string) bool {
	switch id {
	case "host-driver", "driver-os":
		return true
	case "plan":
		return strings.Contains(message, plan.ErrMissingLicense.Error())
	}
	return false
}

// detectBlocked says why the wizard cannot go on from detection ("" when it can).
func (m *Model) detectBlocked() string {
	if m.detecting {
		return "detecting"
	}
	if m.check == nil {
		if m.checkErr != nil {
			return m.checkErr.Error()
		}
		return "nothing detected"
	}
	if m.check.Detection == nil {
		return "gpuctl cannot read this cluster"
	}
	var blocking []string
	for _, r := range m.check.Report.Results {
		if r.Status == "fail" && !choiceFixable(r.ID, r.Message) {
			blocking = append(blocking, r.ID)
		}
	}
	if len(blocking) > 0 {
		return "failed: " + strings.Join(blocking, ", ")
	}
	return ""
}

func (m *Model) detectKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case key.Matches(msg, m.keys.Quit):
		return m.interrupt()
	case key.Matches(msg, m.keys.Back):
		m.screen, m.scroll = screenContext, 0
	case key.Matches(msg, m.keys.Recheck):
		if !m.detecting {
			m.scroll = 0
			return m.startDetect()
		}
	case key.Matches(msg, m.keys.Next):
		if m.detectBlocked() != "" {
			return nil
		}
		if m.fields == nil {
			m.detected = detectedProfile(m.check)
			c := initialChoices(m.cfg.Base, m.detected, hostDriver(m.check), m.profiles)
			m.fields = buildFields(m.st, m.profiles, m.bundles, m.detected, c, nil)
			m.fieldSel = 0
		}
		m.screen, m.scroll = screenChoices, 0
	default:
		m.scrollKey(msg)
	}
	return nil
}

// detectedProfile is the profile gpuctl chooses by itself: the Plan's, or the default one.
func detectedProfile(c *engine.CheckResult) string {
	if c != nil && c.Plan != nil && c.Plan.Profile != "" {
		return c.Plan.Profile
	}
	if c != nil && c.Detection != nil {
		if _, err := profile.Get(c.Detection.Distribution.Name); err == nil {
			return c.Detection.Distribution.Name
		}
	}
	return profile.Default
}

func hostDriver(c *engine.CheckResult) bool {
	if c == nil || c.Detection == nil {
		return false
	}
	for _, n := range c.Detection.GPUNodes {
		if n.HostDriver != "" {
			return true
		}
	}
	return len(c.Detection.Existing.HostDriverNodes) > 0
}

func (m *Model) choicesKey(msg tea.KeyPressMsg) tea.Cmd {
	f := &m.fields[m.fieldSel]
	text := f.kind != kindSelect
	move := func(d int) tea.Cmd {
		f.input.Blur()
		m.fieldSel = (m.fieldSel + d + len(m.fields)) % len(m.fields)
		if nf := &m.fields[m.fieldSel]; nf.kind != kindSelect {
			return nf.input.Focus()
		}
		return nil
	}
	switch s := msg.String(); {
	case s == "up" || s == "shift+tab" || (!text && s == "k"):
		return move(-1)
	case s == "down" || s == "tab" || (!text && s == "j"):
		return move(1)
	case s == "esc" || (!text && s == "b"):
		f.input.Blur()
		m.screen, m.scroll = screenDetect, 0
		return nil
	case s == "enter":
		f.input.Blur()
		return m.startReview()
	case !text && key.Matches(msg, m.keys.Quit):
		return m.interrupt()
	case !text && key.Matches(msg, m.keys.Left, m.keys.Right):
		d := 1
		if key.Matches(msg, m.keys.Left) {
			d = -1
		}
		if n := len(f.options); n > 0 {
			f.sel = (f.sel + d + n) % n
		}
		if f.id == fieldProfile {
			c := choicesFrom(m.fields)
			c.Driver = initialChoices(engine.InstallOptions{Profile: c.Profile}, c.Profile, hostDriver(m.check), m.profiles).Driver
			m.fields = buildFields(m.st, m.profiles, m.bundles, m.detected, c, m.fields)
		}
		return nil
	case f.kind == kindFile && s == "ctrl+o":
		return m.openPicker()
	}
	if text {
		var cmd tea.Cmd
		f.input, cmd = f.input.Update(msg)
		return cmd
	}
	return nil
}

func (m *Model) openPicker() tea.Cmd {
	fp := filepicker.New()
	dir := m.cfg.WorkDir
	if cur := m.fields[m.fieldSel].value(); cur != "" {
		dir = filepath.Dir(cur)
	}
	if dir == "" {
		dir, _ = os.Getwd()
	}
	fp.CurrentDirectory = dir
	fp.ShowPermissions, fp.ShowSize = false, true
	fp.SetHeight(max(m.bodyHeight()-3, 3))
	m.picker = &fp
	return fp.Init()
}

func (m *Model) pickerUpdate(msg tea.Msg) tea.Cmd {
	if k, ok := msg.(tea.KeyPressMsg); ok && (k.String() == "esc" || k.String() == "q") {
		m.picker = nil
		return nil
	}
	fp, cmd := m.picker.Update(msg)
	m.picker = &fp
	if ok, path := fp.DidSelectFile(msg); ok {
		f := &m.fields[m.fieldSel]
		f.input.SetValue(path)
		m.picker = nil
	}
	return cmd
}

func (m *Model) startReview() tea.Cmd {
	m.choice = choicesFrom(m.fields)
	m.opts = options(m.cfg.Base, m.detected, m.profiles, m.choice)
	m.screen, m.scroll, m.notice = screenReview, 0, ""
	m.seq++
	m.reviewing, m.review, m.reviewErr = true, nil, nil
	seq, b, kc, o, ctx := m.seq, m.cfg.Backend, m.kubeContext, m.opts, m.ctx
	return func() tea.Msg {
		res, err := b.Check(ctx, kc, o)
		return checkedMsg{seq: seq, review: true, res: res, err: err}
	}
}

// reviewBlocked says why the reviewed plan cannot be installed ("" when it can).
func (m *Model) reviewBlocked() string {
	switch {
	case m.reviewing:
		return "checking"
	case m.review == nil || m.review.Plan == nil:
		if m.reviewErr != nil {
			return m.reviewErr.Error()
		}
		return "no plan"
	case m.review.Report.Failed:
		return "failed: " + strings.Join(m.review.Report.IDs("fail"), ", ")
	case m.reviewErr != nil:
		return m.reviewErr.Error()
	}
	return ""
}

func (m *Model) reviewKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case key.Matches(msg, m.keys.Quit):
		return m.interrupt()
	case key.Matches(msg, m.keys.Back):
		m.screen, m.scroll, m.notice = screenChoices, 0, ""
	case key.Matches(msg, m.keys.Save):
		path := m.cfg.SavePath
		if err := SaveConfig(path, m.opts, m.cfg.Namespace, m.kubeContext); err != nil {
			m.notice = markFail + " " + err.Error()
			return nil
		}
		m.saved = path
		m.notice = markOK + " saved " + path + " (gpuctl install --config FILE replays it)"
	case key.Matches(msg, m.keys.Next):
		if m.reviewBlocked() != "" {
			return nil
		}
		return m.startInstall()
	default:
		m.scrollKey(msg)
	}
	return nil
}

func (m *Model) scrollKey(msg tea.KeyPressMsg) {
	switch {
	case key.Matches(msg, m.keys.Up):
		m.scroll--
	case key.Matches(msg, m.keys.Down):
		m.scroll++
	case key.Matches(msg, m.keys.PageUp):
		m.scroll -= m.bodyHeight() - 1
	case key.Matches(msg, m.keys.PageDown):
		m.scroll += m.bodyHeight() - 1
	}
	m.scroll = max(m.scroll, 0)
}

// installRun is one engine.Install running in its own goroutine; its events, its Confirm call and its
// end arrive as messages on ch.
type installRun struct {
	ch     chan tea.Msg
	cancel context.CancelFunc
	// ended is closed when engine.Install has returned (the lock is released by then).
	ended chan struct{}
}

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

func (m *Model) startInstall() tea.Cmd {
	ctx, cancel := context.WithCancel(m.ctx)
	r := &installRun{ch: make(chan tea.Msg, 64), cancel: cancel, ended: make(chan struct{})}
	m.run = r
	m.screen, m.scroll, m.notice = screenInstall, 0, ""
	m.finished, m.asking, m.stopping, m.warnings = false, false, false, nil
	m.outcome = Outcome{}
	m.steps = []stepState{{id: preflightStep, title: "Preflight checks"}}
	for _, s := range m.review.Plan.Steps {
		m.steps = append(m.steps, stepState{id: s.ID, title: s.Title, kind: s.Kind, skip: s.Skip})
	}
	b, kc, o := m.cfg.Backend, m.kubeContext, m.opts
	getenv := m.getenv()
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
	return r.listen()
}

// getenv hands the engine the typed NGC key as the value of the variable the options name; other
// variables come from the environment.
func (m *Model) getenv() func(string) string {
	key, env, base := m.choice.NGCKey, m.opts.Licensing.NGCAPIKeyEnv, m.cfg.Getenv
	return func(name string) string {
		if key != "" && name == env {
			return key
		}
		return base(name)
	}
}

// confirm answers the engine's Confirm: yes exactly when its Plan is the one the person reviewed.
func (m *Model) confirm(msg confirmMsg) tea.Cmd {
	same := m.review != nil && samePlan(msg.plan, m.review.Plan)
	if same && !m.stopping {
		m.outcome.Confirmed = true
		if m.cfg.PlanFile != "" {
			if err := writePlan(m.cfg.PlanFile, msg.plan); err != nil {
				m.warnings = append(m.warnings, err.Error())
			}
		}
	} else if !same {
		m.notice = markWarn + " the cluster changed since the review: review the new plan"
	}
	msg.reply <- same && !m.stopping
	return m.run.listen()
}

func (m *Model) installDone(msg installDoneMsg) tea.Cmd {
	m.finished, m.asking = true, false
	m.outcome.Result, m.outcome.Err = msg.res, msg.err
	if errors.Is(msg.err, engine.ErrNotConfirmed) && !m.stopping {
		// The Plan changed under the review: show the new one.
		m.run = nil
		notice := m.notice
		cmd := m.startReview()
		m.notice = notice
		return cmd
	}
	if m.stopping || (!m.outcome.Confirmed && errors.Is(msg.err, context.Canceled)) {
		if !m.outcome.Confirmed {
			m.outcome.Quit = true
		}
		return m.quit()
	}
	return nil
}

func (m *Model) installKey(msg tea.KeyPressMsg) tea.Cmd {
	if m.asking {
		switch {
		case key.Matches(msg, m.keys.Yes):
			return m.interrupt()
		case key.Matches(msg, m.keys.No):
			m.asking = false
		}
		return nil
	}
	if m.finished {
		switch {
		case key.Matches(msg, m.keys.Back) && !m.outcome.Confirmed:
			m.run, m.finished, m.screen, m.scroll = nil, false, screenReview, 0
			return nil
		case key.Matches(msg, m.keys.Next, m.keys.Quit):
			return m.quit()
		}
	}
	if key.Matches(msg, m.keys.Quit) && msg.String() == "q" && !m.finished {
		return m.interrupt()
	}
	m.scrollKey(msg)
	return nil
}

// reviewValues are the value lines of each release of the reviewed Plan.
func reviewValues(res *engine.CheckResult) map[string][]string {
	out := map[string][]string{}
	if res == nil || res.Plan == nil {
		return out
	}
	for _, s := range res.Plan.Steps {
		if s.Release == nil {
			continue
		}
		// A chart that cannot be loaded (a fake's) has no defaults to compare with.
		defaults, _ := render.ChartDefaults(s.Release.Chart, s.Release.AppVersion)
		out[s.ID] = valueLines(s.Release, defaults)
	}
	return out
}

func samePlan(a, b *plan.Plan) bool {
	ja, err1 := planJSON(a)
	jb, err2 := planJSON(b)
	return err1 == nil && err2 == nil && ja == jb
}
