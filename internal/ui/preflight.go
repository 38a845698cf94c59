package ui

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gpuctl/gpuctl/internal/preflight"
)

// mark is a status's symbol: linkerd's √ ‼ × (and – for skipped) in colour, or words a log reader
// can grep, padded to one width, when there is no colour.
func preflightMark(s preflight.Status, color bool) string {
	type look struct{ code, symbol, word string }
	l := map[preflight.Status]look{
		preflight.StatusPass: {ansiGreen, "√", "ok"},
		preflight.StatusWarn: {ansiYellow, "‼", "warning"},
		preflight.StatusFail: {ansiRed, "×", "FAILED"},
		preflight.StatusSkip: {ansiDim, "–", "skipped"},
	}[s]
	if color {
		return l.code + l.symbol + ansiReset
	}
	return fmt.Sprintf("%-7s", l.word)
}

// PrintPreflight prints the report the way `linkerd check` does: each category under an underlined header,
// one line per check, the message and a hint under warnings and failures, and a summary line. color
// selects symbols and ANSI colours over plain words.
func PrintPreflight(w io.Writer, r preflight.Report, color bool) error {
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
		if res.Status == preflight.StatusWarn {
			warnings++
		}
		msg := strings.TrimRight(res.Message, "\n")
		inline := (res.Status == preflight.StatusPass || res.Status == preflight.StatusSkip) && msg != "" && !strings.Contains(msg, "\n")
		line := preflightMark(res.Status, color) + " " + res.Description
		if inline {
			line += " (" + msg + ")"
		}
		fmt.Fprintln(bw, line)
		if !inline && msg != "" {
			for _, l := range strings.Split(msg, "\n") {
				fmt.Fprintln(bw, "    "+l)
			}
		}
		if res.Hint != "" && res.Status != preflight.StatusPass {
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
	overall := preflight.StatusPass
	if r.Failed {
		overall = preflight.StatusFail
	}
	summary := "Status check results are " + strings.TrimSpace(preflightMark(overall, color))
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
	if failed := r.IDs(preflight.StatusFail); len(failed) > 0 && !slices.Contains(failed, "api") && !slices.Contains(failed, "plan") {
		fmt.Fprintf(bw, "To go ahead anyway, skip what failed with --skip-check %s (only if you know why it fails).\n", strings.Join(failed, " --skip-check "))
	}
	return bw.Flush()
}
