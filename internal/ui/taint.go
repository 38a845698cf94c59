package ui

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// PrintTaintResult prints a taint or untaint result for people: a dry run's plan, or what the run
// changed and did not. A run refused before its first write prints nothing here (the error says why).
func PrintTaintResult(w io.Writer, res *engine.TaintResult, err error) error {
	b := &strings.Builder{}
	p := res.Plan
	switch {
	case res.DryRun:
		printNodePlan(b, p, "gpuctl "+p.Verb+" would:")
	case err != nil && len(res.Done) == 0 && len(res.NotDone) == 0:
	default:
		done := *p
		done.Changes = res.Done
		printNodePlan(b, &done, "gpuctl "+p.Verb+" did:")
		for _, n := range res.NotDone {
			fmt.Fprintf(b, "  not done: node/%s: %s\n", n.Node, n.Reason)
		}
	}
	_, werr := io.WriteString(w, b.String())
	return werr
}

// printNodePlan writes a taint or untaint plan for people under heading: what the run does (or did),
// then the nodes left alone, grouped by reason, the workloads it affects and why install would not
// taint.
func printNodePlan(w io.Writer, p *plan.NodePlan, heading string) {
	fmt.Fprintln(w, heading)
	for _, c := range p.Changes {
		fmt.Fprintf(w, "  %s\n", c)
	}
	if len(p.Changes) == 0 {
		fmt.Fprintln(w, "  no node to change")
	}
	byReason := map[string][]string{}
	var reasons []string
	for _, u := range p.Unchanged {
		if _, ok := byReason[u.Reason]; !ok {
			reasons = append(reasons, u.Reason)
		}
		byReason[u.Reason] = append(byReason[u.Reason], u.Node)
	}
	for _, r := range reasons {
		fmt.Fprintf(w, "  leave %s: %s\n", nodeNames(byReason[r]), r)
	}
	for _, ws := range p.Workloads {
		fmt.Fprintf(w, "  running today without the toleration: %s: %s\n", ws, ws.Effect)
	}
	for _, warn := range p.Warnings {
		fmt.Fprintf(w, "Warning: %s\n", warn)
	}
	if p.PodToleration != "" && len(p.Changes) > 0 {
		fmt.Fprintf(w, "Pods that should run on the tainted nodes need %s.\n", p.PodToleration)
	}
}

// nodeNames lists nodes as "node/a, node/b", the first few of many with how many more.
func nodeNames(names []string) string {
	const shown = 5
	var parts []string
	for i, n := range names {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more (-o json lists them)", len(names)-shown))
			break
		}
		parts = append(parts, "node/"+n)
	}
	return strings.Join(parts, ", ")
}
