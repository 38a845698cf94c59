package ui

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/gpuctl/gpuctl/internal/event"
)

// Progress renders engine events on a stream (stderr). Use NewProgress; call Close when done so a
// spinner stops and its line is cleared.
type Progress struct {
	w     io.Writer
	style Style
	json  bool
	now   func() time.Time

	mu       sync.Mutex
	current  *event.Event // the running step, for the spinner
	lastMsg  map[string]string
	stop     chan struct{}
	done     chan struct{}
	frame    int
	lineOpen bool
}

// Format of progress output.
type Format string

const (
	// FormatAuto: a spinner on a terminal, plain lines otherwise.
	FormatAuto Format = "auto"
	// FormatPlain: plain lines even on a terminal.
	FormatPlain Format = "plain"
	// FormatJSON: one JSON event per line.
	FormatJSON Format = "json"
)

// NewProgress returns a renderer for w in the given format and style.
func NewProgress(w io.Writer, format Format, style Style) *Progress {
	p := &Progress{w: w, style: style, json: format == FormatJSON, now: time.Now, lastMsg: map[string]string{}}
	if format == FormatPlain || p.json {
		p.style.TTY = false
	}
	if p.style.TTY {
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go p.spin()
	}
	return p
}

// MaxPendingJSON is how many pending names a JSON progress event lists; the rest are counted in
// pendingOmitted.
const MaxPendingJSON = 20

// Event renders one event (engine.Sink).
func (p *Progress) Event(e event.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Time.IsZero() {
		e.Time = p.now()
	}
	if p.json {
		p.writeJSON(e)
		return
	}
	switch e.Type {
	case event.StepStarted:
		ev := e
		p.current = &ev
		if !p.style.TTY {
			p.line("%s%s …", p.counter(e), e.Title)
		}
	case event.StepProgress:
		p.stepProgress(e)
	case event.StepSucceeded, event.StepSkipped, event.StepFailed, event.StepInterrupted:
		p.current = nil
		p.stepEnded(e)
	case event.Warning:
		p.line("%s %s", p.style.warn(), e.Message)
		if e.Hint != "" {
			p.line("    hint: %s", e.Hint)
		}
	case event.Info:
		p.line("%s", e.Message)
	}
}

// writeJSON writes the event as one JSON line, its pending names cut to MaxPendingJSON.
func (p *Progress) writeJSON(e event.Event) {
	if len(e.Pending) > MaxPendingJSON {
		e.PendingOmitted = len(e.Pending) - MaxPendingJSON
		e.Pending = e.Pending[:MaxPendingJSON]
	}
	b, err := json.Marshal(e)
	if err == nil {
		fmt.Fprintf(p.w, "%s\n", b)
	}
}

// stepProgress takes a running step's progress to the spinner, or to a plain line when it says
// something new.
func (p *Progress) stepProgress(e event.Event) {
	if p.current != nil && p.current.Step == e.Step {
		p.current.Message, p.current.Done, p.current.Total = e.Message, e.Done, e.Total
	}
	// Plain output prints progress only when it says something new, so CI logs stay short.
	if !p.style.TTY && e.Message != "" && p.lastMsg[e.Step] != e.Message {
		p.lastMsg[e.Step] = e.Message
		p.line("%s  %s", p.counter(e), e.Message)
	}
}

// stepEnded prints a step's outcome: its mark, title and message, and for a failure the error,
// its detail and the hint.
func (p *Progress) stepEnded(e event.Event) {
	mark := p.style.ok()
	switch e.Type {
	case event.StepSkipped:
		mark = p.style.skip()
	case event.StepFailed:
		mark = p.style.fail()
	case event.StepInterrupted:
		mark = p.style.interrupted()
	}
	msg := e.Title
	if e.Message != "" {
		msg += ": " + e.Message
	}
	p.line("%s%s %s", p.counter(e), mark, msg)
	if e.Type != event.StepFailed {
		return
	}
	if e.Err != "" {
		p.line("    %s", e.Err)
	}
	if e.Detail != "" {
		p.block(e.Detail)
	}
	if e.Hint != "" {
		p.line("    hint: %s", e.Hint)
	}
}

func (p *Progress) counter(e event.Event) string {
	if e.Count == 0 {
		return ""
	}
	width := len(fmt.Sprint(e.Count))
	return p.style.paint(ansiDim, fmt.Sprintf("[%*d/%d]", width, e.Index, e.Count)) + " "
}

// line prints a finished line, clearing the spinner's line first on a terminal.
func (p *Progress) line(format string, args ...any) {
	p.clearSpinner()
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *Progress) block(text string) {
	p.clearSpinner()
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintf(p.w, "    %s\n", l)
	}
}

func (p *Progress) clearSpinner() {
	if p.lineOpen {
		fmt.Fprint(p.w, "\r\x1b[2K")
		p.lineOpen = false
	}
}

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

func (p *Progress) spin() {
	defer close(p.done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			if p.current != nil {
				p.frame = (p.frame + 1) % len(spinnerFrames)
				text := p.current.Title
				if p.current.Message != "" {
					text += ": " + p.current.Message
				}
				fmt.Fprintf(p.w, "\r\x1b[2K%s%s %s", p.counter(*p.current), p.style.paint(ansiBold, spinnerFrames[p.frame]), text)
				p.lineOpen = true
			}
			p.mu.Unlock()
		}
	}
}

// Close stops the spinner and clears its line.
func (p *Progress) Close() {
	if p.stop != nil {
		close(p.stop)
		<-p.done
		p.stop = nil
	}
	p.mu.Lock()
	p.clearSpinner()
	p.mu.Unlock()
}
