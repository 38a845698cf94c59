package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuctl/gpuctl/internal/event"
)

func events() []event.Event {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	return []event.Event{
		{Time: at, Type: event.StepStarted, Step: "validators", Title: "Wait for validators", Index: 3, Count: 12},
		{Time: at, Type: event.StepProgress, Step: "validators", Index: 3, Count: 12, Message: "1/2 GPU nodes validated", Done: 1, Total: 2},
		{Time: at, Type: event.StepProgress, Step: "validators", Index: 3, Count: 12, Message: "1/2 GPU nodes validated", Done: 1, Total: 2},
		{Time: at, Type: event.StepProgress, Step: "validators", Index: 3, Count: 12, Message: "2/2 GPU nodes validated", Done: 2, Total: 2},
		{Time: at, Type: event.StepSucceeded, Step: "validators", Title: "Wait for validators", Index: 3, Count: 12, Message: "2/2 GPU nodes validated"},
		{Time: at, Type: event.StepFailed, Step: "policy", Title: "Wait for ClusterPolicy", Index: 4, Count: 12, Err: "timed out", Detail: "pod x: CrashLoopBackOff", Hint: "check the driver"},
		{Time: at, Type: event.Warning, Message: "NFD already runs in kube-system"},
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
		var e event.Event
		if err := json.Unmarshal([]byte(lines[5]), &e); err != nil {
			t.Fatal(err)
		}
		if e.Type != event.StepFailed || e.Hint != "check the driver" || e.Detail == "" {
			t.Errorf("decoded %+v", e)
		}
	})

	t.Run("json progress lists at most MaxPendingJSON pending names and counts the rest", func(t *testing.T) {
		var b bytes.Buffer
		p := NewProgress(&b, FormatJSON, Style{})
		pending := make([]string, 2000)
		for i := range pending {
			pending[i] = fmt.Sprintf("gpu-%04d", i)
		}
		p.Event(event.Event{Type: event.StepProgress, Step: "wait-validators", Done: 0, Total: 2000, Pending: pending})
		p.Event(event.Event{Type: event.StepProgress, Step: "wait-validators", Done: 1999, Total: 2000, Pending: pending[:1]})
		p.Close()
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		var big, small event.Event
		if err := json.Unmarshal([]byte(lines[0]), &big); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(lines[1]), &small); err != nil {
			t.Fatal(err)
		}
		if len(big.Pending) != MaxPendingJSON || big.Pending[0] != "gpu-0000" || big.PendingOmitted != 2000-MaxPendingJSON {
			t.Errorf("2,000 pending: listed %d (first %q), omitted %d", len(big.Pending), big.Pending[0], big.PendingOmitted)
		}
		if len(small.Pending) != 1 || small.PendingOmitted != 0 || strings.Contains(lines[1], "pendingOmitted") {
			t.Errorf("1 pending: %s", lines[1])
		}
		if len(pending) != 2000 || pending[MaxPendingJSON] != fmt.Sprintf("gpu-%04d", MaxPendingJSON) {
			t.Error("the renderer changed the caller's slice")
		}
	})

	t.Run("a terminal gets a spinner line that finished lines replace", func(t *testing.T) {
		var b lockedBuffer
		p := NewProgress(&b, FormatAuto, Style{TTY: true})
		p.Event(events()[0])
		p.Event(events()[1])
		// The spinner draws on its own ticker (every 100 ms): wait until it has, however loaded the
		// machine, up to 30 s.
		drawn := "\r\x1b[2K[ 3/12] "
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(b.String(), drawn); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no spinner line within 30 s: %q", b.String())
			}
		}
		p.Event(events()[4])
		p.Close()
		out := b.String()
		if !strings.Contains(out, "Wait for validators: 1/2 GPU nodes validated") {
			t.Errorf("the spinner line does not show the step's progress: %q", out)
		}
		if !strings.HasSuffix(out, "ok Wait for validators: 2/2 GPU nodes validated\n") {
			t.Errorf("final line: %q", out)
		}
	})
}

// lockedBuffer is a buffer that the spinner's goroutine writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
