package wizard

import (
	"bytes"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"
)

// TestProgram runs the wizard as a real Bubble Tea program (teatest) at 80x24, keys in and frames
// out, through the whole flow to a finished install against the fake engine.
func TestProgram(t *testing.T) {
	f := newFake()
	m, err := New(t.Context(), Config{Backend: f, SavePath: t.TempDir() + "/gpuctl.yaml", WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(80, 24))
	waitFor := func(text string) {
		t.Helper()
		teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
			return bytes.Contains([]byte(ansi.Strip(string(b))), []byte(text))
		}, teatest.WithDuration(time.Minute)) // a bound on a hang, not a speed: CI runs this beside the e2e sandboxes
	}
	enter := tea.KeyPressMsg{Code: tea.KeyEnter}
	waitFor("Which cluster?")
	tm.Send(enter)
	waitFor("Distribution")
	tm.Send(enter)
	waitFor("Your choices")
	tm.Send(enter)
	waitFor("Nodes to taint")
	tm.Send(enter)
	waitFor("Installed")
	tm.Send(enter)
	final := tm.FinalModel(t, teatest.WithFinalTimeout(time.Minute)).(*Model)
	out := final.Outcome()
	if !out.Confirmed || out.Err != nil || out.Result == nil || len(f.wrote()) != 8 {
		t.Errorf("outcome %+v, steps run %v", out, f.wrote())
	}
}
