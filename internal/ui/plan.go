package ui

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/internal/plan"
)

// printDrivers lists the driver each GPU node gets, where the plan chose per node (--precompiled auto).
func printDrivers(b *strings.Builder, drivers []plan.NodeDriver, style Style) {
	if len(drivers) == 0 {
		return
	}
	fmt.Fprintf(b, "\n%s\n", style.paint(ansiBold, "Drivers ("+plan.PrecompiledSource+"):"))
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  NODE\tKERNEL\tDRIVER\tFROM\tIMAGE, OR WHY COMPILED")
	for _, d := range drivers {
		kind, what := "compiled", d.Why
		if d.Precompiled {
			kind, what = "precompiled", d.Image
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", d.Node, d.Kernel, kind, d.Driver, what)
	}
	tw.Flush()
}

// printAdoption says what --adopt takes over: the release, which of its own values stay, and each
// value it ran with that the install changes (from → to, and which layer sets it).
func printAdoption(b *strings.Builder, a *plan.Adoption, style Style) {
	if a == nil {
		return
	}
	fmt.Fprintf(b, "\n%s Helm release %s/%s (revision %d, chart %s %s), installed without gpuctl; its values stay, as %s\n",
		style.paint(ansiBold, "Adopting:"), a.Namespace, a.Release, a.Revision, a.Chart, a.ChartVersion, a.Source)
	if len(a.Kept) > 0 {
		fmt.Fprintf(b, "  kept: %s\n", strings.Join(a.Kept, ", "))
	}
	if a.NFDSubchart {
		fmt.Fprintf(b, "  NFD: its %s subchart keeps running as it is, outside the release (helm.sh/resource-policy: keep); gpuctl uses it and installs no NFD of its own\n", plan.NFDKey)
	}
	if len(a.Changes) == 0 {
		fmt.Fprintf(b, "  changes: none of the values it runs with\n")
		return
	}
	fmt.Fprintf(b, "  changes (%d):\n", len(a.Changes))
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for _, c := range a.Changes {
		fmt.Fprintf(tw, "    %s\t%s → %s\t(%s)\n", c.Key, shortValue(c.From), shortValue(c.To), c.Source)
	}
	tw.Flush()
}

// shortValue is a value on one line, cut at 60 characters.
func shortValue(v any) string {
	data, err := json.Marshal(v)
	s := string(data)
	if err != nil {
		s = fmt.Sprint(v)
	}
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// PrintPlan prints a Plan for people: what was detected, the steps in order, and the values each
// release gets with where they came from.
func PrintPlan(w io.Writer, p *plan.Plan, style Style) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "%s %s (%s)\n", style.paint(ansiBold, "Distribution:"), p.Distribution, p.DistributionWhy)
	fmt.Fprintf(b, "%s %s (%s)\n", style.paint(ansiBold, "Profile:     "), p.Profile, p.ProfileWhy)
	fmt.Fprintf(b, "%s %s\n", style.paint(ansiBold, "Namespace:   "), p.Namespace)
	gpu := "none known yet (NFD will find them)"
	if len(p.GPUNodes) > 0 {
		gpu = strings.Join(p.GPUNodes, ", ")
	}
	fmt.Fprintf(b, "%s %s\n", style.paint(ansiBold, "GPU nodes:   "), gpu)
	for _, w := range p.Warnings {
		fmt.Fprintf(b, "%s %s\n", style.warn(), w)
	}
	printDrivers(b, p.Drivers, style)
	printAdoption(b, p.Adoption, style)
	fmt.Fprintf(b, "\n%s\n", style.paint(ansiBold, "Steps:"))
	for i, s := range p.Steps {
		line := fmt.Sprintf("%2d. %s", i+1, s.Title)
		if s.Skip != "" {
			line = style.paint(ansiDim, line+"  (skipped: "+s.Skip+")")
		}
		fmt.Fprintln(b, line)
		if s.Why != "" && s.Skip == "" {
			fmt.Fprintf(b, "    %s\n", style.paint(ansiDim, s.Why))
		}
	}
	if p.Writes != nil {
		fmt.Fprintf(b, "\n%s %s\n", style.paint(ansiBold, "Writes:"), style.paint(ansiDim, "(-o json lists each)"))
		for _, l := range p.Writes.Summary() {
			fmt.Fprintf(b, "  %s\n", l)
		}
	}
	for _, s := range p.Steps {
		if s.Release == nil || s.Skip != "" {
			continue
		}
		r := s.Release
		fmt.Fprintf(b, "\n%s %s (chart %s %s)\n", style.paint(ansiBold, "Values for release"), r.Name, r.Chart, r.ChartVersion)
		var sources []string
		for _, l := range r.Layers {
			if len(l.Values) > 0 {
				sources = append(sources, l.Source)
			}
		}
		fmt.Fprintf(b, "  from (lowest precedence first): %s\n", strings.Join(sources, " < "))
		y, err := yaml.Marshal(r.Values)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(strings.TrimRight(string(y), "\n"), "\n") {
			fmt.Fprintf(b, "  %s\n", l)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
