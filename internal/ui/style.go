package ui

import (
	"io"
	"os"

	"golang.org/x/term"
)

// Style is how output may look on one stream.
type Style struct {
	// TTY: the stream is a terminal (a spinner may redraw a line).
	TTY bool
	// Color: ANSI colours and the ✔ ‼ × symbols may be used.
	Color bool
}

// DetectStyle inspects w: a terminal gets a spinner, and colour unless NO_COLOR is set
// (https://no-color.org) or TERM is dumb.
func DetectStyle(w io.Writer, getenv func(string) string) Style {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return Style{}
	}
	color := getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
	return Style{TTY: true, Color: color}
}

const (
	ansiReset  = "\x1b[0m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiDim    = "\x1b[2m"
	ansiBold   = "\x1b[1m"
)

func (s Style) paint(code, text string) string {
	if !s.Color {
		return text
	}
	return code + text + ansiReset
}

// Mark symbols: on a colour terminal ✔ ‼ × and –, otherwise words a log reader can grep.
func (s Style) ok() string {
	if s.Color {
		return s.paint(ansiGreen, "✔")
	}
	return "ok"
}

func (s Style) warn() string {
	if s.Color {
		return s.paint(ansiYellow, "‼")
	}
	return "warning"
}

func (s Style) fail() string {
	if s.Color {
		return s.paint(ansiRed, "×")
	}
	return "FAILED"
}

func (s Style) skip() string {
	if s.Color {
		return s.paint(ansiDim, "–")
	}
	return "skipped"
}

func (s Style) interrupted() string {
	if s.Color {
		return s.paint(ansiYellow, "■")
	}
	return "interrupted"
}
