package ui

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// PrintInstallResult prints the outcome of an install for people.
func PrintInstallResult(w io.Writer, r *engine.InstallResult, namespace string, style Style) error {
	b := &strings.Builder{}
	if len(r.GPUNodes) > 0 {
		fmt.Fprintf(b, "%s %d/%d GPU nodes validated: %s\n", style.ok(), len(r.GPUNodes), len(r.GPUNodes), strings.Join(r.GPUNodes, ", "))
	}
	if !r.Changed {
		fmt.Fprintln(b, "No changes: the cluster already matched the plan.")
	}
	if len(r.Releases) > 0 {
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "RELEASE\tNAMESPACE\tREVISION\tSTATUS\tCHART\tAPP VERSION")
		for _, rel := range r.Releases {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s-%s\t%s\n", rel.Name, rel.Namespace, rel.Revision, rel.Status, rel.Chart, rel.ChartVersion, rel.AppVersion)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	policy := "cluster-policy"
	if r.Plan != nil {
		namespace = r.Plan.Namespace
		if s := r.Plan.Step("wait-clusterpolicy"); s != nil {
			policy = s.Target
		}
	}
	fmt.Fprintf(b, "\nLook around:\n  kubectl get pods -n %s -o wide\n  kubectl get clusterpolicy %s\n  helm list -A\n", namespace, policy)
	_, err := io.WriteString(w, b.String())
	return err
}

// PrintInterrupted prints where an interrupted run (install, upgrade, uninstall) stopped: the steps that finished, the one in
// flight with the state it left, the ones that never started, and how to go on.
func PrintInterrupted(w io.Writer, e *runner.InterruptedError) error {
	b := &strings.Builder{}
	if e.BeforeFirstWrite {
		fmt.Fprintln(b, "gpuctl: interrupted before the first write: nothing was changed.")
		_, err := io.WriteString(w, b.String())
		return err
	}
	switch {
	case e.InFlight != nil:
		fmt.Fprintf(b, "gpuctl: interrupted during step %d/%d, %s.\n", len(e.Finished)+1, e.Count, e.InFlight.Title)
	default:
		fmt.Fprintf(b, "gpuctl: interrupted after step %d/%d.\n", len(e.Finished), e.Count)
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	if len(e.Finished) > 0 {
		ids := make([]string, 0, len(e.Finished))
		for _, r := range e.Finished {
			ids = append(ids, r.ID)
		}
		fmt.Fprintf(tw, "  finished:\t%s\n", strings.Join(ids, ", "))
	}
	if e.InFlight != nil {
		fmt.Fprintf(tw, "  in flight:\t%s: %s\n", e.InFlight.ID, e.InFlight.Message)
	}
	if len(e.NotStarted) > 0 {
		fmt.Fprintf(tw, "  not started:\t%s\n", strings.Join(e.NotStarted, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	resume := e.Resume
	if resume == "" {
		resume = runner.ResumeHint
	}
	fmt.Fprintf(b, "To go on, %s.\n", resume)
	_, err := io.WriteString(w, b.String())
	return err
}
