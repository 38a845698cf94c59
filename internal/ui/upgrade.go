package ui

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/release"
)

// PrintUpgradePreview prints what an upgrade will change: the operator release, each Helm release's
// move, NVIDIA's upgrade notes, and a diff of every rendered object that changes (the ClusterPolicy first).
func PrintUpgradePreview(w io.Writer, p *engine.UpgradePreview, style Style) error {
	b := &strings.Builder{}
	switch p.Change {
	case plan.VersionSame:
		fmt.Fprintf(b, "GPU Operator %s (no version change)\n", p.To)
	default:
		fmt.Fprintf(b, "GPU Operator %s → %s (%s)\n", p.From, p.To, p.Change)
	}
	if err := writeReleaseMoves(b, p.Releases); err != nil {
		return err
	}
	writeSharingChange(b, p.Sharing)
	writeMIGChange(b, p.MIG)
	if !p.Values.Empty() {
		fmt.Fprintf(b, "\nValues (%s; docs/troubleshooting.md#upgrades):\n", p.Values.Summary())
		for _, l := range p.Values.Lines() {
			fmt.Fprintf(b, "  - %s\n", l)
		}
	}
	if len(p.Notes) > 0 {
		b.WriteString("\nUpgrade notes:\n")
		for _, n := range p.Notes {
			fmt.Fprintf(b, "  - %s\n", n)
		}
	}
	for _, d := range p.Diffs {
		fmt.Fprintf(b, "\n%s %s (%s):\n", d.Change, d.Object, d.Release)
		writeDiff(b, d.Diff, style)
	}
	if !releasesChange(p.Releases) {
		b.WriteString("\nNo release changes.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeReleaseMoves writes the table of the Helm releases' moves, then what each recreates of what
// was deleted from the cluster.
func writeReleaseMoves(b *strings.Builder, releases []engine.ReleaseChange) error {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RELEASE\tFROM\tTO\tHELM")
	for _, r := range releases {
		from := "-"
		if r.FromChart != "" {
			from = fmt.Sprintf("%s (%s, revision %d)", r.FromChart, r.FromApp, r.FromRevison)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s (%s)\t%s\n", r.Name, from, r.ToChart, r.ToApp, r.Outcome)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range releases {
		if len(r.Recreate) > 0 {
			fmt.Fprintf(b, "\n%s recreates what was deleted from the cluster: %s\n", r.Name, strings.Join(r.Recreate, ", "))
		}
	}
	return nil
}

// writeSharingChange writes --sharing's move and the node labels it sets, if the upgrade has one.
func writeSharingChange(b *strings.Builder, sh *engine.SharingChange) {
	if sh == nil {
		return
	}
	fmt.Fprintf(b, "\nGPU sharing: %s → %s\n", sharingText(sh.From), sharingText(sh.To))
	if sh.Labels != nil {
		for _, n := range slices.Sorted(maps.Keys(sh.Labels.Nodes)) {
			fmt.Fprintf(b, "  %s: %s=%s\n", n, sh.Labels.Key, sh.Labels.Nodes[n])
		}
	}
}

// writeMIGChange writes --mig's move and the node labels it sets, marking the nodes MIG manager
// repartitions, if the upgrade has one.
func writeMIGChange(b *strings.Builder, m *engine.MIGChange) {
	if m == nil {
		return
	}
	fmt.Fprintf(b, "\nMIG: %s → %s\n", sharingText(m.From), sharingText(m.To))
	if m.Labels != nil {
		for _, n := range slices.Sorted(maps.Keys(m.Labels.Nodes)) {
			line := fmt.Sprintf("  %s: %s=%s", n, m.Labels.Key, m.Labels.Nodes[n])
			if slices.Contains(m.Repartition, n) {
				line += "  (new config: MIG manager repartitions its GPUs and stops the GPU pods on it)"
			}
			b.WriteString(line + "\n")
		}
	}
}

// writeDiff writes a unified diff, its added lines green and its removed lines red where style
// has colour.
func writeDiff(b *strings.Builder, diff string, style Style) {
	for _, line := range strings.SplitAfter(diff, "\n") {
		switch {
		case strings.HasPrefix(line, "+") && !strings.HasPrefix(line, "+++"):
			b.WriteString(style.paint(ansiGreen, strings.TrimSuffix(line, "\n")))
			if strings.HasSuffix(line, "\n") {
				b.WriteString("\n")
			}
		case strings.HasPrefix(line, "-") && !strings.HasPrefix(line, "---"):
			b.WriteString(style.paint(ansiRed, strings.TrimSuffix(line, "\n")))
			if strings.HasSuffix(line, "\n") {
				b.WriteString("\n")
			}
		default:
			b.WriteString(line)
		}
	}
}

// releasesChange reports whether the upgrade changes any release.
func releasesChange(releases []engine.ReleaseChange) bool {
	for _, r := range releases {
		if r.Outcome != release.Unchanged {
			return true
		}
	}
	return false
}

// sharingText is a --sharing choice as the preview shows it.
func sharingText(values []string) string {
	if len(values) == 0 {
		return "none"
	}
	return strings.Join(values, " ")
}
