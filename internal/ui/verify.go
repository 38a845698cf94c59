package ui

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
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

// PrintVerifyPlan prints a verify run's writes for people: the pods (and DRA's
// ResourceClaimTemplates) it deletes, with UIDs and why, creates, and deletes when the run ends.
func PrintVerifyPlan(w io.Writer, p *plan.VerifyPlan) error {
	if p == nil {
		return nil
	}
	b := &strings.Builder{}
	fmt.Fprintf(b, "gpuctl verify would (run %s):\n", p.RunID)
	for _, d := range p.Delete {
		fmt.Fprintf(b, "  delete pod %s/%s (uid %s; %s)\n", d.Namespace, d.Name, d.UID, d.Why)
	}
	for _, d := range p.DeleteClaimTemplates {
		fmt.Fprintf(b, "  delete resourceclaimtemplate %s/%s (uid %s; %s)\n", d.Namespace, d.Name, d.UID, d.Why)
	}
	for _, ct := range p.ClaimTemplates {
		fmt.Fprintf(b, "  create resourceclaimtemplate %s/%s (one device of DeviceClass %s)\n", ct.Namespace, ct.Name, ct.DeviceClass)
	}
	secrets := ""
	if len(p.ImagePullSecrets) > 0 {
		secrets = ", pulled with " + strings.Join(p.ImagePullSecrets, ", ")
	}
	for _, c := range p.Create {
		gpu := c.Resource
		if c.ClaimTemplate != "" {
			gpu = ", a ResourceClaim from " + c.ClaimTemplate
		} else if gpu != "" {
			gpu = ", one " + gpu
		}
		fmt.Fprintf(b, "  create pod %s/%s on node %s (image %s%s%s)\n", c.Namespace, c.Name, c.Node, c.Image, secrets, gpu)
	}
	for _, name := range p.DeleteAtEnd {
		fmt.Fprintf(b, "  delete pod %s/%s when the run ends\n", p.Namespace, name)
	}
	for _, name := range p.DeleteClaimTemplatesAtEnd {
		fmt.Fprintf(b, "  delete resourceclaimtemplate %s/%s when the run ends, after the pods\n", p.Namespace, name)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
