package ui

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gpuctl/gpuctl/internal/engine"
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
