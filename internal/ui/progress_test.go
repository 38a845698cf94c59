package ui

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpuctl/gpuctl/internal/engine"
)

func events() []engine.Event {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	return []engine.Event{
		{Time: at, Type: engine.StepStarted, Step: "validators", Title: "Wait for validators", Index: 3, Count: 12},
		{Time: at, Type: engine.StepProgress, Step: "validators", Index: 3, Count: 12, Message: "1/2 GPU nodes validated", Done: 1, Total: 2},
		{Time: at, Type: engine.StepProgress, Step: "validators", Index: 3, Count: 12, Message: "1/2 GPU nodes validated", Done: 1, Total: 2},
		{Time: at, Type: engine.StepProgress, Step: "validators", Index: 3, Count: 12, Message: "2/2 GPU nodes validated", Done: 2, Total: 2},
		{Time: at, Type: engine.StepSucceeded, Step: "validators", Title: "Wait for validators", Index: 3, Count: 12, Message: "2/2 GPU nodes validated"},
		{Time: at, Type: engine.StepFailed, Step: "policy", Title: "Wait for ClusterPolicy", Index: 4, Count: 12, Err: "timed out", Detail: "pod x: CrashLoopBackOff", Hint: "check the driver"},
		{Time: at, Type: engine.Warning, Message: "NFD already runs in kube-system"},
	}
}

func TestProgress(t *testing.T) {
	t.Run("plain output has one line per news, words instead of symbols, and no escape codes", func(t *testing.T) {
		var b bytes.Buffer
		p := NewProgress(&b, FormatAuto, Style{})
		for _, e := range events() {
			p.Event(e)
		}
		p.Close()
		out := b.String()
		want := []string{
			"[ 3/12] Wait for validators …",
			"[ 3/12]   1/2 GPU nodes validated",
			"[ 3/12]   2/2 GPU nodes validated",
			"[ 3/12] ok Wait for validators: 2/2 GPU nodes validated",
			"[ 4/12] FAILED Wait for ClusterPolicy",
			"    timed out",
			"    pod x: CrashLoopBackOff",
			"    hint: check the driver",
			"warning NFD already runs in kube-system",
		}
		if got := strings.Split(strings.TrimSpace(out), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if strings.Contains(out, "\x1b") {
			t.Errorf("escape codes in plain output: %q", out)
		}
	})

	t.Run("colour output uses the check-mark symbols", func(t *testing.T) {
		var b bytes.Buffer
		p := NewProgress(&b, FormatPlain, Style{Color: true})
		for _, e := range events() {
			p.Event(e)
		}
		p.Close()
		for _, sym := range []string{"✔", "×", "‼"} {
			if !strings.Contains(b.String(), sym) {
				t.Errorf("no %s in %q", sym, b.String())
			}
		}
	})

	t.Run("json output is one event object per line", func(t *testing.T) {
		var b bytes.Buffer
		p := NewProgress(&b, FormatJSON, Style{TTY: true, Color: true})
		for _, e := range events() {
			p.Event(e)
		}
		p.Close()
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		if len(lines) != len(events()) {
			t.Fatalf("%d lines for %d events", len(lines), len(events()))
		}
		var e engine.Event
		if err := json.Unmarshal([]byte(lines[5]), &e); err != nil {
			t.Fatal(err)
		}
		if e.Type != engine.StepFailed || e.Hint != "check the driver" || e.Detail == "" {
			t.Errorf("decoded %+v", e)
		}
	})

	t.Run("a terminal gets a spinner line that finished lines replace", func(t *testing.T) {
		var b bytes.Buffer
		p := NewProgress(&b, FormatAuto, Style{TTY: true})
		p.Event(events()[0])
		p.Event(events()[1])
		time.Sleep(250 * time.Millisecond) // let the spinner draw
		p.Event(events()[4])
		p.Close()
		out := b.String()
		if !strings.Contains(out, "\r\x1b[2K") || !strings.Contains(out, "1/2 GPU nodes validated") {
			t.Errorf("no spinner redraw in %q", out)
		}
		if !strings.HasSuffix(out, "ok Wait for validators: 2/2 GPU nodes validated\n") {
			t.Errorf("final line: %q", out)
		}
	})
}
