package wizard

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/ui"
)

// table aligns rows in columns two spaces apart.
func table(rows [][]string) []string {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], ansi.StringWidth(c))
		}
	}
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-ansi.StringWidth(c)+2))
			}
		}
		out = append(out, strings.TrimRight(b.String(), " "))
	}
	return out
}

func (e *env) mark(s preflight.Status) string {
	switch s {
	case preflight.StatusPass:
		return e.st.ok.Render(markOK)
	case preflight.StatusWarn:
		return e.st.warn.Render(markWarn)
	case preflight.StatusFail:
		return e.st.fail.Render(markFail)
	}
	return e.st.dim.Render(markSkip)
}

// choiceFixable are failed checks a choice on the choices screen can resolve: the driver's source,
// and a plan that needs the NVIDIA AI Enterprise inputs.
func choiceFixable(id, message string) bool {
	switch id {
	case "host-driver", "driver-os":
		return true
	case "plan":
		return strings.Contains(message, plan.ErrMissingLicense.Error())
	}
	return false
}

// reportLines prints the preflight results: a summary line, then each warning and failure with its
// hint (passes only count; all adds the skipped checks).
func (e *env) reportLines(b *strings.Builder, r preflight.Report, all bool) {
	counts := map[preflight.Status]int{}
	for _, res := range r.Results {
		counts[res.Status]++
	}
	fmt.Fprintf(b, "%s %d passed, %s, %d failed, %d skipped\n", e.st.heading.Render("Preflight"),
		counts[preflight.StatusPass], ui.Plural(counts[preflight.StatusWarn], "warning"), counts[preflight.StatusFail], counts[preflight.StatusSkip])
	for _, res := range r.Results {
		if res.Status != preflight.StatusWarn && res.Status != preflight.StatusFail && !(all && res.Status != preflight.StatusPass) {
			continue
		}
		fix := ""
		if res.Status == preflight.StatusFail && choiceFixable(res.ID, res.Message) {
			fix = " (a choice on the next screen decides this)"
		}
		fmt.Fprintf(b, "  %s %s [%s]%s\n", e.mark(res.Status), res.Description, res.ID, fix)
		for _, l := range strings.Split(strings.TrimRight(res.Message, "\n"), "\n") {
			if l != "" {
				e.para(b, "      ", l)
			}
		}
		if res.Hint != "" {
			e.para(b, "      ", "hint: "+res.Hint)
		}
	}
}
