package ui

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpuctl/gpuctl/internal/engine"
)

// PrintTaintResult prints a taint or untaint result for people: a dry run's plan, or what the run
// changed and did not. A run refused before its first write prints nothing here (the error says why).
func PrintTaintResult(w io.Writer, res *engine.TaintResult, err error) error {
	b := &strings.Builder{}
	p := res.Plan
	switch {
	case res.DryRun:
		p.Print(b, "gpuctl "+p.Verb+" would:")
	case err != nil && len(res.Done) == 0 && len(res.NotDone) == 0:
	default:
		done := *p
		done.Changes = res.Done
		done.Print(b, "gpuctl "+p.Verb+" did:")
		for _, n := range res.NotDone {
			fmt.Fprintf(b, "  not done: node/%s: %s\n", n.Node, n.Reason)
		}
	}
	_, werr := io.WriteString(w, b.String())
	return werr
}
