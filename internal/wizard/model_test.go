package wizard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/gpuctl/gpuctl/internal/engine"
)

// harness drives the model with messages, as Bubble Tea would: each command runs in its own
// goroutine and its message comes back through msgs. Spinner ticks and cursor blinks are dropped, so
// views do not change with time.
type harness struct {
	t    *testing.T
	m    *Model
	msgs chan tea.Msg
	quit bool
	// inflight counts commands still running (a command waiting on a blocked install never ends).
	inflight atomic.Int32
	// patience is how long settle waits for running commands (default 2s); tests with an install
	// blocked on purpose shorten it.
	patience time.Duration
}

func start(t *testing.T, f *fakeBackend, opts ...func(*Config)) *harness {
	t.Helper()
	cfg := Config{Backend: f, Now: func() time.Time { return epoch.Add(time.Minute) },
		SavePath: filepath.Join(t.TempDir(), "gpuctl.yaml"), WorkDir: t.TempDir(), Base: engine.InstallOptions{Timeout: 20 * time.Minute}}
	for _, o := range opts {
		o(&cfg)
	}
	m, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, m: m, msgs: make(chan tea.Msg, 256)}
	t.Cleanup(m.drain)
	h.update(tea.WindowSizeMsg{Width: 80, Height: 24})
	h.exec(m.Init())
	h.settle()
	return h
}

func (h *harness) exec(cmd tea.Cmd) {
	if cmd != nil {
		h.inflight.Add(1)
		go func() {
			h.msgs <- cmd()
			h.inflight.Add(-1)
		}()
	}
}

func (h *harness) update(msg tea.Msg) {
	_, cmd := h.m.Update(msg)
	h.exec(cmd)
}

// settle handles messages until no command is running and none has come for a while, or, when a
// command waits on something that does not come (a blocked install), for at most two seconds.
func (h *harness) settle() {
	patience := h.patience
	if patience == 0 {
		patience = 2 * time.Second
	}
	deadline := time.Now().Add(patience)
	for {
		select {
		case msg := <-h.msgs:
			switch msg := msg.(type) {
			case nil, spinner.TickMsg:
			case tea.BatchMsg:
				for _, c := range msg {
					h.exec(c)
				}
			case tea.QuitMsg:
				h.quit = true
			default:
				if strings.Contains(fmt.Sprintf("%T", msg), "cursor.") {
					continue
				}
				h.update(msg)
			}
		case <-time.After(50 * time.Millisecond):
			if (h.inflight.Load() == 0 && len(h.msgs) == 0) || time.Now().After(deadline) {
				return
			}
		}
	}
}

// keys presses each key in turn ("enter", "esc", "ctrl+c", "down", "s", or text to type).
func (h *harness) keys(keys ...string) {
	h.t.Helper()
	for _, k := range keys {
		h.update(keyMsg(k))
		h.settle()
	}
}

func (h *harness) typeText(s string) {
	for _, r := range s {
		h.update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	h.settle()
}

func keyMsg(k string) tea.KeyPressMsg {
	switch k {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "left":
		return tea.KeyPressMsg{Code: tea.KeyLeft}
	case "right":
		return tea.KeyPressMsg{Code: tea.KeyRight}
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "ctrl+c":
		return tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	}
	r := []rune(k)[0]
	return tea.KeyPressMsg{Code: r, Text: k}
}

func (h *harness) view() string { return h.m.Render() }

// step is the step of the screen shown.
func (h *harness) step() step { return h.m.top().step() }

// session is the session of the screen shown.
func (h *harness) session() session { return h.m.top().session() }

// choices is the choices screen, shown or under the screen shown.
func (h *harness) choices() *choicesScreen {
	h.t.Helper()
	for _, s := range h.m.screens {
		if c, ok := s.(*choicesScreen); ok {
			return c
		}
	}
	h.t.Fatalf("no choices screen:\n%s", h.view())
	return nil
}

// install is the install screen (fails unless it is shown).
func (h *harness) install() *installScreen {
	h.t.Helper()
	in, ok := h.m.top().(*installScreen)
	if !ok {
		h.t.Fatalf("on screen %s, want %s:\n%s", stepNames[h.step()], stepNames[stepInstall], h.view())
	}
	return in
}

// expectScreen fails unless the wizard shows the screen.
func (h *harness) expectScreen(s step) {
	h.t.Helper()
	if h.step() != s {
		h.t.Fatalf("on screen %s, want %s:\n%s", stepNames[h.step()], stepNames[s], h.view())
	}
}

// settleUntil settles until the view shows every part (a run that blocks keeps commands in flight, so
// one settle ends at its patience, which a loaded machine may spend before the events arrive), for at
// most 30 seconds; expectView then says what is missing.
func (h *harness) settleUntil(parts ...string) {
	h.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		h.settle()
		v := ansi.Strip(h.view())
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(v, p) }) {
			return
		}
	}
}

func (h *harness) expectView(parts ...string) {
	h.t.Helper()
	v := ansi.Strip(h.view())
	for _, p := range parts {
		if !strings.Contains(v, p) {
			h.t.Errorf("view lacks %q:\n%s", p, v)
		}
	}
}

// golden compares the view with testdata/<test name>.golden (go test -update rewrites it) and
// checks that it fits the screen.
func (h *harness) golden() {
	h.t.Helper()
	v := h.view()
	lines := strings.Split(v, "\n")
	if len(lines) != h.m.env.height {
		h.t.Errorf("view has %d lines, the screen %d", len(lines), h.m.env.height)
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w > h.m.env.width {
			h.t.Errorf("line %d is %d wide, the screen %d: %q", i+1, w, h.m.env.width, l)
		}
	}
	golden.RequireEqual(h.t, v)
}

// toReview walks from the start to the review screen with the detected answers.
func (h *harness) toReview() {
	h.t.Helper()
	h.keys("enter") // context
	h.expectScreen(stepDetect)
	h.keys("enter") // detection
	h.expectScreen(stepChoices)
	h.keys("enter") // choices
	h.expectScreen(stepReview)
}

func TestScreens(t *testing.T) {
	t.Run("context lists the kubeconfig's contexts with the current one preselected", func(t *testing.T) {
		h := start(t, newFake())
		h.expectView("› gke-prod", "gke_proj_us-central1_prod")
		h.golden()
	})
	t.Run("detection shows the distribution, GPU nodes, existing installs and preflight", func(t *testing.T) {
		h := start(t, newFake())
		h.keys("enter")
		h.expectView("gke v1.33.5-gke.100", "gke-gpu-0", "nvidia-tesla-a100", "Node Feature Discovery: none", "‼ container runtime")
		h.golden()
	})
	t.Run("detection in colour", func(t *testing.T) {
		h := start(t, newFake(), func(c *Config) { c.Color = true })
		h.keys("enter")
		if !strings.Contains(h.view(), "\x1b[") {
			t.Error("no colour in a colour view")
		}
		h.golden()
	})
	t.Run("a failed check blocks detection and says why", func(t *testing.T) {
		f := newFake()
		f.failCheck = "existing-operator"
		h := start(t, f)
		h.keys("enter", "enter")
		h.expectScreen(stepDetect)
		h.expectView("blocked: failed: existing-operator")
		h.golden()
		h.keys("pgdown", "pgdown")
		h.expectView("A failed check blocks the install (failed: existing-operator)", "hint: uninstall it first")
	})
	t.Run("choices preselect the detected answers", func(t *testing.T) {
		h := start(t, newFake())
		h.keys("enter", "enter")
		h.expectView("‹ gke (detected) ›", "‹ v26.7.0 (default) ›", "‹ platform-managed ›", "‹ single (chart default) ›")
		h.golden()
	})
	t.Run("choices for TKGS ask for the licensing inputs, the NGC key masked", func(t *testing.T) {
		h := start(t, newFake())
		h.keys("enter", "enter")
		for h.choices().fields[0].value() != "tkgs" {
			h.keys("right")
		}
		h.expectView("NLS client token", "gridd.conf", "vGPU guest driver container")
		for h.choices().field().id != fieldNGC {
			h.keys("down")
		}
		h.expectView("› NGC API key") // the screen scrolls to the selected question
		h.typeText("nvapi-secret")
		if strings.Contains(h.view(), "nvapi-secret") {
			t.Error("the NGC key is echoed")
		}
		h.golden()
	})
	t.Run("review shows steps, nodes to taint and values with their layers", func(t *testing.T) {
		h := start(t, newFake())
		h.toReview()
		h.expectView("1. Namespace gpu-operator", "Nodes to taint", "gke-gpu-0, gke-gpu-1")
		h.golden()
		h.keys("pgdown")
		h.expectView("driver.enabled=false", "(profile gke)")
	})
	t.Run("install shows each step with its duration and each GPU node while validators run", func(t *testing.T) {
		f := newFake()
		f.blockAt = "wait-validators"
		h := start(t, f)
		h.toReview()
		h.keys("enter")
		<-f.blocked
		h.patience = 300 * time.Millisecond
		h.settleUntil("✔ Install NVIDIA GPU Operator v26.7.0 2s", "✔ gke-gpu-0 done", "gke-gpu-1 waiting")
		h.expectView("✔ Install NVIDIA GPU Operator v26.7.0 2s", "✔ gke-gpu-0 done", "gke-gpu-1 waiting")
		h.golden()
	})
	t.Run("install done shows the summary and next steps", func(t *testing.T) {
		h := start(t, newFake())
		h.toReview()
		h.keys("enter")
		h.expectView("✔ Installed", "2/2 GPU nodes validated")
		h.golden()
	})
}

func TestFlow(t *testing.T) {
	t.Run("the detected answers install what the review showed, and the saved file says how to replay it", func(t *testing.T) {
		f := newFake()
		planFile := filepath.Join(t.TempDir(), "plan.json")
		h := start(t, f, func(c *Config) { c.PlanFile = planFile })
		h.toReview()
		h.keys("s")
		h.expectView("✔ saved")
		h.keys("enter")
		h.expectScreen(stepInstall)
		if !h.install().finished || h.install().outcome.Err != nil {
			t.Fatalf("install not finished well: %v\n%s", h.install().outcome.Err, h.view())
		}
		if got := f.wrote(); len(got) != 8 {
			t.Errorf("steps run: %v", got)
		}
		h.keys("enter")
		if !h.quit {
			t.Fatal("enter on the finished install did not quit")
		}
		out := h.m.Outcome()
		if !out.Confirmed || out.Quit || out.Context != "gke-prod" {
			t.Errorf("outcome %+v", out)
		}
		if !strings.Contains(out.Summary, "gpuctl install --config "+h.m.env.cfg.SavePath) {
			t.Errorf("summary does not name the replay:\n%s", out.Summary)
		}
		b, err := os.ReadFile(planFile)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := planJSON(h.install().s.review.Plan)
		if got := strings.Join(strings.Fields(string(b)), ""); got != strings.Join(strings.Fields(want), "") {
			t.Errorf("plan file differs from the reviewed plan")
		}
	})

	t.Run("back-navigation keeps answers and the review follows the choices", func(t *testing.T) {
		f := newFake()
		h := start(t, f)
		h.keys("down", "enter") // second context? no: gke-prod is last, down stays
		h.expectScreen(stepDetect)
		h.keys("esc")
		h.expectScreen(stepContext)
		h.keys("up", "enter")
		if h.session().kubeContext != "dev" {
			t.Errorf("context %q, want dev", h.session().kubeContext)
		}
		h.keys("enter")
		h.expectScreen(stepChoices)
		h.keys("down", "down", "right", "right") // taint: no
		h.keys("down", "down", "right")          // MIG: mixed
		h.keys("enter")
		h.expectScreen(stepReview)
		h.expectView("(skipped: --no-taint)")
		if o := h.session().opts; !o.NoTaint || !slices.Equal(o.Set, []string{"mig.strategy=mixed"}) {
			t.Errorf("options %+v", o)
		}
		h.keys("esc")
		h.expectScreen(stepChoices)
		if c := choicesFrom(h.choices().fields); c.Taint != taintNo || c.MIG != "mixed" {
			t.Errorf("answers lost going back: %+v", c)
		}
		h.keys("up", "up", "left") // taint: yes (--taint)
		h.keys("enter")
		h.expectScreen(stepReview)
		if o := h.session().opts; o.NoTaint || !o.Taint {
			t.Errorf("taint answer not taken back: %+v", o)
		}
		h.keys("esc", "esc")
		h.expectScreen(stepDetect)
		h.keys("esc")
		h.expectScreen(stepContext)
		if len(f.installs) != 0 || len(f.wrote()) != 0 {
			t.Errorf("navigating installed something: %v", f.wrote())
		}
	})

	t.Run("a host driver found by detection preselects pre-installed, which sets driver.enabled=false", func(t *testing.T) {
		f := newFake()
		f.distro, f.hostDriver = "kubeadm", true
		h := start(t, f)
		h.keys("enter", "enter")
		h.expectView("‹ pre-installed on the nodes ›")
		h.keys("enter")
		if !slices.Equal(h.session().opts.Set, []string{"driver.enabled=false"}) || h.session().opts.Profile != "" {
			t.Errorf("options %+v", h.session().opts)
		}
	})

	t.Run("a plan that changed after the review is shown again, not installed", func(t *testing.T) {
		f := newFake()
		f.changeAfterReview = true
		h := start(t, f)
		h.toReview()
		h.keys("enter")
		h.expectScreen(stepReview)
		h.expectView("the cluster changed since the review")
		if len(f.wrote()) != 0 {
			t.Fatalf("wrote %v", f.wrote())
		}
		h.keys("enter")
		h.expectScreen(stepInstall)
		if len(f.wrote()) == 0 || !h.install().outcome.Confirmed {
			t.Error("the second confirmation did not install")
		}
	})

	t.Run("the NGC key reaches the engine as the variable's value and is never saved", func(t *testing.T) {
		f := newFake()
		dir := t.TempDir()
		tok, gridd := filepath.Join(dir, "client_configuration_token.tok"), filepath.Join(dir, "gridd.conf")
		h := start(t, f)
		h.keys("enter", "enter")
		for h.choices().fields[0].value() != "tkgs" {
			h.keys("right")
		}
		for _, in := range []struct{ id, text string }{{fieldNLS, tok}, {fieldGridd, gridd}, {fieldNGC, "nvapi-secret"}} {
			for h.choices().field().id != in.id {
				h.keys("down")
			}
			h.typeText(in.text)
		}
		h.keys("enter")
		h.expectScreen(stepReview)
		h.keys("s", "enter")
		b, err := os.ReadFile(h.m.env.cfg.SavePath)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "nvapi-secret") || !strings.Contains(string(b), "nls-token-file: "+tok) {
			t.Errorf("saved config:\n%s", b)
		}
		if f.getenv == nil || f.getenv(ngcKeyEnv) != "nvapi-secret" {
			t.Error("the engine did not get the typed key from $" + ngcKeyEnv)
		}
		if strings.Contains(h.view(), "nvapi-secret") || strings.Contains(h.m.Outcome().Summary, "nvapi-secret") {
			t.Error("the key is shown")
		}
	})
}

// TestGoingBack: a screen shown again after going back starts from what the screens before it
// have now, not from what a later screen had made of an earlier answer.
func TestGoingBack(t *testing.T) {
	t.Run("going back and detecting again offers the new detection's answers, not the old ones", func(t *testing.T) {
		f := newFake()
		h := start(t, f)
		h.keys("enter", "enter")
		h.expectView("‹ gke (detected) ›")
		f.distro = "kubeadm"
		h.keys("esc", "r")
		h.expectView("Distribution kubeadm")
		h.keys("enter")
		h.expectView("‹ kubeadm (detected) ›")
	})

	t.Run("a config saved for other choices is not named as the replay of the install", func(t *testing.T) {
		h := start(t, newFake())
		h.toReview()
		h.keys("s")
		h.expectView("✔ saved")
		h.keys("esc", "down", "down", "right", "right", "enter") // taint: no
		h.expectView("(skipped: --no-taint)")
		h.keys("enter", "enter")
		if !h.quit {
			t.Fatalf("enter on the finished install did not quit:\n%s", h.view())
		}
		if s := h.m.Outcome().Summary; strings.Contains(s, "--config") || !strings.Contains(s, "--no-taint") {
			t.Errorf("summary replays the saved config, not the install:\n%s", s)
		}
	})
}

func TestFilePicker(t *testing.T) {
	t.Run("ctrl+o browses for the NLS token and enter picks the file", func(t *testing.T) {
		dir := t.TempDir()
		tok := filepath.Join(dir, "client_configuration_token.tok")
		if err := os.WriteFile(tok, []byte("token"), 0o600); err != nil {
			t.Fatal(err)
		}
		h := start(t, newFake(), func(c *Config) { c.WorkDir = dir })
		h.keys("enter", "enter")
		for h.choices().fields[0].value() != "tkgs" {
			h.keys("right")
		}
		for h.choices().field().id != fieldNLS {
			h.keys("down")
		}
		h.update(tea.KeyPressMsg{Code: 'o', Mod: tea.ModCtrl})
		h.settle()
		h.expectView("Choose the NLS client token file", "client_configuration_token.tok")
		h.keys("enter")
		if h.choices().picker != nil || h.choices().field().value() != tok {
			t.Errorf("picked %q, want %q:\n%s", h.choices().field().value(), tok, h.view())
		}
	})
}

func TestNoColor(t *testing.T) {
	t.Run("without colour no screen has an escape code", func(t *testing.T) {
		h := start(t, newFake())
		for _, k := range []string{"", "enter", "enter", "enter", "enter"} {
			if k != "" {
				h.keys(k)
			}
			if v := h.view(); strings.Contains(v, "\x1b") {
				t.Errorf("%s: escape codes without colour: %q", stepNames[h.step()], v)
			}
		}
	})
}

func TestCtrlC(t *testing.T) {
	before := map[string][]string{
		"context":   nil,
		"detection": {"enter"},
		"choices":   {"enter", "enter"},
		"review":    {"enter", "enter", "enter"},
		"a text field": {"enter", "enter", "right", "right", "right", "right", "right", "right", "right", "right",
			"down", "down", "down", "down", "down"},
	}
	for name, keys := range before {
		t.Run("on "+name+" it leaves at once with nothing changed", func(t *testing.T) {
			f := newFake()
			h := start(t, f)
			h.keys(keys...)
			h.keys("ctrl+c")
			if !h.quit {
				t.Fatalf("ctrl+c did not quit:\n%s", h.view())
			}
			out := h.m.Outcome()
			if !out.Quit || !errors.Is(out.Err, context.Canceled) || len(f.installs) != 0 {
				t.Errorf("outcome %+v, installs %d", out, len(f.installs))
			}
			if !strings.Contains(out.Summary, "nothing was changed") {
				t.Errorf("summary: %s", out.Summary)
			}
		})
	}

	t.Run("during the install it asks, n keeps going, y stops and says what finished", func(t *testing.T) {
		f := newFake()
		f.blockAt = "wait-validators"
		h := start(t, f)
		h.toReview()
		h.keys("enter")
		<-f.blocked
		h.patience = 300 * time.Millisecond
		h.settleUntil("✔ gke-gpu-0 done", "gke-gpu-1 waiting")
		h.keys("ctrl+c")
		h.expectView("Stop the install?")
		h.golden()
		h.keys("n")
		if h.install().asking || h.quit {
			t.Fatal("n did not keep going")
		}
		h.keys("ctrl+c", "y")
		if !h.quit {
			t.Fatalf("y did not stop:\n%s", h.view())
		}
		out := h.m.Outcome()
		if out.Quit || !out.Confirmed || !errors.Is(out.Err, context.Canceled) {
			t.Errorf("outcome %+v", out)
		}
		for _, want := range []string{"interrupted", "Finished: Namespace gpu-operator;", "Stopped in: Wait for the validator on every GPU node (1/2 GPU nodes validated; gke-gpu-1 still waits).", "gpuctl install resumes"} {
			if !strings.Contains(out.Summary, want) {
				t.Errorf("summary lacks %q:\n%s", want, out.Summary)
			}
		}
	})
}

func TestResize(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {120, 40}, {60, 16}} {
		t.Run(fmt.Sprintf("every screen fits %dx%d", size[0], size[1]), func(t *testing.T) {
			h := start(t, newFake())
			h.update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
			for _, k := range []string{"", "enter", "enter", "enter", "enter"} {
				if k != "" {
					h.keys(k)
				}
				lines := strings.Split(h.view(), "\n")
				if len(lines) != size[1] {
					t.Errorf("%s: %d lines", stepNames[h.step()], len(lines))
				}
				for _, l := range lines {
					if ansi.StringWidth(l) > size[0] {
						t.Errorf("%s: line wider than %d: %q", stepNames[h.step()], size[0], l)
					}
				}
			}
		})
	}
}
