package preflight

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
)

const (
	ansiReset  = "\x1b[0m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiDim    = "\x1b[2m"
)

// mark is a status's symbol: linkerd's √ ‼ × (and – for skipped) in colour, or words a log reader
// can grep, padded to one width, when there is no colour.
func mark(s Status, color bool) string {
	type look struct{ code, symbol, word string }
	l := map[Status]look{
		StatusPass: {ansiGreen, "√", "ok"},
		StatusWarn: {ansiYellow, "‼", "warning"},
		StatusFail: {ansiRed, "×", "FAILED"},
		StatusSkip: {ansiDim, "–", "skipped"},
	}[s]
	if color {
		return l.code + l.symbol + ansiReset
	}
	return fmt.Sprintf("%-7s", l.word)
}

// Render prints the report the way `linkerd check` does: each category under an underlined header,
// one line per check, the message and a hint under warnings and failures, and a summary line. color
// selects symbols and ANSI colours over plain words.
func (r Report) Render(w io.Writer, color bool) error {
	bw := bufio.NewWriter(w)
	category := ""
	warnings := 0
	for _, res := range r.Results {
		if res.Category != category {
			if category != "" {
				fmt.Fprintln(bw)
			}
			category = res.Category
			fmt.Fprintf(bw, "%s\n%s\n", category, strings.Repeat("-", len([]rune(category))))
		}
		if res.Status == StatusWarn {
			warnings++
		}
		msg := strings.TrimRight(res.Message, "\n")
		inline := (res.Status == StatusPass || res.Status == StatusSkip) && msg != "" && !strings.Contains(msg, "\n")
		line := mark(res.Status, color) + " " + res.Description
		if inline {
			line += " (" + msg + ")"
		}
		fmt.Fprintln(bw, line)
		if !inline && msg != "" {
			for _, l := range strings.Split(msg, "\n") {
				fmt.Fprintln(bw, "    "+l)
			}
		}
		if res.Hint != "" && res.Status != StatusPass {
			if strings.HasPrefix(res.Hint, "http://") || strings.HasPrefix(res.Hint, "https://") {
				fmt.Fprintf(bw, "    see: %s\n", res.Hint)
			} else {
				fmt.Fprintf(bw, "    hint: %s\n", res.Hint)
			}
		}
	}
	if len(r.Results) > 0 {
		fmt.Fprintln(bw)
	}
	overall := StatusPass
	if r.Failed {
		overall = StatusFail
	}
	summary := "Status check results are " + strings.TrimSpace(mark(overall, color))
	switch warnings {
	case 0:
	case 1:
		summary += " (1 warning)"
	default:
		summary += fmt.Sprintf(" (%d warnings)", warnings)
	}
	fmt.Fprintln(bw, summary)
	// Skipping helps only when the check is wrong about this cluster; without the API or a plan there
	// is nothing to go ahead with, so no skip is suggested then.
	if failed := r.IDs(StatusFail); len(failed) > 0 && !slices.Contains(failed, "api") && !slices.Contains(failed, "plan") {
		fmt.Fprintf(bw, "To go ahead anyway, skip what failed with --skip-check %s (only if you know why it fails).\n", strings.Join(failed, " --skip-check "))
	}
	return bw.Flush()
}
