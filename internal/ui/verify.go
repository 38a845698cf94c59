package ui

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gpuctl/gpuctl/internal/engine"
)

// PrintVerify prints gpuctl verify for people: one line per GPU node with its verdict; under a node
// that did not pass, why, its pod's last log lines and its events; then the tally and what was removed.
func PrintVerify(w io.Writer, r *engine.VerifyResult, style Style) error {
	b := &strings.Builder{}
	width := 0
	for _, n := range r.Nodes {
		width = max(width, len(n.Node))
	}
	passed := 0
	for _, n := range r.Nodes {
		if n.Outcome == engine.VerifyPassed {
			passed++
			fmt.Fprintf(b, "%s %-*s  passed in %s", style.ok(), width, n.Node, time.Duration(n.Duration).Round(100*time.Millisecond))
			if req := n.Request(); req != "" {
				fmt.Fprintf(b, " with %s", req)
			}
			b.WriteString("\n")
			continue
		}
		fmt.Fprintf(b, "%s %-*s  %s", style.fail(), width, n.Node, n.Outcome)
		if n.Reason != "" {
			fmt.Fprintf(b, ": %s", n.Reason)
		}
		b.WriteString("\n")
		fmt.Fprintf(b, "    pod:   %s/%s\n", r.Namespace, n.Pod)
		if req := n.Request(); req != "" {
			fmt.Fprintf(b, "    asked: %s\n", req)
		}
		for _, l := range n.Logs {
			fmt.Fprintf(b, "    log:   %s\n", l)
		}
		for _, e := range n.Events {
			fmt.Fprintf(b, "    event: %s\n", e)
		}
	}
	b.WriteString("\n")
	if r.Passed {
		fmt.Fprintf(b, "Verify: %s %d/%d GPU nodes ran %s\n", style.ok(), passed, len(r.Nodes), r.Image)
	} else {
		fmt.Fprintf(b, "Verify: %s %d/%d GPU nodes ran %s\n", style.fail(), passed, len(r.Nodes), r.Image)
	}
	if len(r.RemovedEarlier) > 0 {
		fmt.Fprintf(b, "Removed %d pod(s) an earlier verify run left in %s: %s\n", len(r.RemovedEarlier), r.Namespace, strings.Join(r.RemovedEarlier, ", "))
	}
	if len(r.Removed) > 0 {
		fmt.Fprintf(b, "Removed the %d verify pod(s) of run %s from %s.\n", len(r.Removed), r.RunID, r.Namespace)
	}
	if len(r.RemovedClaimTemplates) > 0 {
		fmt.Fprintf(b, "Removed ResourceClaimTemplate(s) %s from %s.\n", strings.Join(r.RemovedClaimTemplates, ", "), r.Namespace)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
