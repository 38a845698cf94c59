package ui

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/uninstall"
)

// PrintUninstall prints an uninstall's result for people: a dry run's plan; a run's outcome (nothing
// for a run that failed: its error says why) and what it kept.
func PrintUninstall(w io.Writer, res *engine.UninstallResult, runErr error) error {
	b := &strings.Builder{}
	switch {
	case res.DryRun:
		printUninstallPlan(b, res.Plan)
	case runErr != nil:
	case !res.Changed:
		fmt.Fprintln(b, "Nothing to uninstall: gpuctl's GPU stack is not installed.")
	default:
		fmt.Fprintln(b, "Uninstalled.")
	}
	if !res.DryRun && runErr == nil && res.Plan != nil {
		for _, k := range res.Plan.Kept {
			fmt.Fprintf(b, "Kept %s.\n", k)
		}
		if pp := res.Plan.Purge; pp != nil {
			for _, k := range pp.Kept {
				fmt.Fprintf(b, "Kept %s: %s.\n", describeKept(k), k.Why)
			}
		}
		for _, k := range res.KeptNamespaces {
			fmt.Fprintf(b, "Kept %s.\n", k)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// printUninstallPlan writes an uninstall's decisions for a person.
func printUninstallPlan(b *strings.Builder, p *uninstall.Plan) {
	if p == nil {
		return
	}
	fmt.Fprintln(b, "gpuctl uninstall would:")
	for _, r := range p.Releases {
		fmt.Fprintf(b, "  uninstall release %s/%s\n", r.Namespace, r.Name)
	}
	for _, d := range p.Delete {
		fmt.Fprintf(b, "  delete %s (uid %s; %s)\n", d, d.UID, d.Why)
	}
	for _, k := range p.Kept {
		fmt.Fprintf(b, "  keep %s\n", k)
	}
	for _, n := range p.Nodes {
		printNodeLabelPlan(b, n)
	}
	if p.Purge != nil {
		printPurgePlan(b, p.Purge)
	}
}

// printNodeLabelPlan writes one node's label and annotation changes for a person.
func printNodeLabelPlan(b *strings.Builder, n uninstall.NodeLabelPlan) {
	for _, k := range n.RemoveLabels {
		fmt.Fprintf(b, "  node %s: remove label %s\n", n.Node, k)
	}
	for _, k := range slices.Sorted(maps.Keys(n.RestoreLabels)) {
		fmt.Fprintf(b, "  node %s: restore label %s=%s\n", n.Node, k, n.RestoreLabels[k])
	}
	for _, k := range n.RemoveAnnotations {
		fmt.Fprintf(b, "  node %s: remove annotation %s\n", n.Node, k)
	}
	for _, k := range slices.Sorted(maps.Keys(n.RestoreAnnotations)) {
		fmt.Fprintf(b, "  node %s: restore annotation %s\n", n.Node, k)
	}
	for _, k := range n.Kept {
		fmt.Fprintf(b, "  node %s: keep %s (written by %v)\n", n.Node, k.Key, k.Managers)
	}
}

// printPurgePlan writes what --purge deletes besides, keeps, and refuses to delete, for a person.
func printPurgePlan(b *strings.Builder, pp *uninstall.PurgePlan) {
	for _, d := range pp.Delete {
		fmt.Fprintf(b, "  delete %s (uid %s; %s)\n", d, d.UID, d.Why)
	}
	for _, k := range pp.Kept {
		fmt.Fprintf(b, "  kept: %s is %s\n", describeKept(k), k.Why)
	}
	for _, k := range pp.KeptNamespaces {
		fmt.Fprintf(b, "  keep %s\n", k)
	}
	for _, f := range pp.Foreign {
		verb := "refuse to delete (not created by gpuctl; --force deletes it)"
		if pp.Forced {
			verb = "delete with its CRD (not created by gpuctl; --force)"
		}
		fmt.Fprintf(b, "  %s: %s\n", verb, f)
	}
}

// describeKept names a kept object as kubectl's users read it.
func describeKept(k uninstall.KeptObject) string {
	if k.Namespace != "" {
		return k.Kind + " " + k.Namespace + "/" + k.Name
	}
	return k.Kind + " " + k.Name
}
