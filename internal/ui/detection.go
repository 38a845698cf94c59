package ui

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// PrintDetection writes a detection result for people: the distribution and why, the GPU nodes and why each counts,
// the node pools, what is already installed, whether tainting GPU nodes is safe, and warnings.
func PrintDetection(w io.Writer, r *detect.Result) error {
	for _, section := range []func(io.Writer, *detect.Result) error{printCluster, printGPUNodes, printPools, printInstalled} {
		if err := section(w, r); err != nil {
			return err
		}
	}
	if err := printTainting(w, r); err != nil {
		return err
	}
	if len(r.Warnings) > 0 {
		fmt.Fprintln(w, "\nWarnings:")
		for _, warn := range r.Warnings {
			fmt.Fprintf(w, "  - %s\n", warn)
		}
	}
	return nil
}

// printCluster writes the distribution with its evidence and the runners-up, the Kubernetes versions,
// Autopilot where GKE was asked, and the node counts.
func printCluster(w io.Writer, r *detect.Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	d := r.Distribution
	version := ""
	if d.Version != "" {
		version = " " + d.Version
	}
	guess := ""
	if d.Fallback {
		guess = "; a guess, nothing identified the distribution"
	}
	p("Distribution:\t%s%s (%s), confidence %d%s\n", d.Name, version, d.Description, d.Confidence, guess)
	for i, e := range d.Evidence {
		label := ""
		if i == 0 {
			label = "  because:"
		}
		p("%s\t%s\n", label, evidenceText(e))
	}
	var others []string
	for _, c := range r.Candidates {
		if c.Name != d.Name {
			others = append(others, fmt.Sprintf("%s %d", c.Name, c.Confidence))
		}
	}
	if len(others) > 0 {
		p("  also scored:\t%s\n", strings.Join(others, ", "))
	}
	p("Kubernetes:\tserver %s; kubelets %s\n", OrNone(r.KubernetesVersion, "unknown"), OrNone(strings.Join(r.KubeletVersions, ", "), "none"))
	if r.Autopilot != nil {
		if r.Autopilot.Detected {
			p("Autopilot:\tyes (%s)\n", evidenceList(r.Autopilot.Evidence))
		} else {
			p("Autopilot:\tno\n")
		}
	}
	n := r.Nodes
	p("Nodes:\t%d: %d control-plane, %d workers, %d with NVIDIA GPUs, %d with NFD labels\n", n.Total, n.ControlPlane, n.Workers, n.GPU, n.NFDLabelled)
	return tw.Flush()
}

// printGPUNodes writes a table of the GPU nodes and why each counts, or where NFD will find them.
func printGPUNodes(w io.Writer, r *detect.Result) error {
	if len(r.GPUNodes) == 0 {
		fmt.Fprintln(w, "\nGPU nodes: none found yet (no nvidia.com/gpu capacity, NVIDIA PCI label, cloud GPU label or GPU instance type); NFD finds them by PCI vendor 10de")
		return nil
	}
	fmt.Fprintln(w, "\nGPU nodes:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NODE\tPOOL\tGPUS\tPRODUCT\tTAINTED\tHOST DRIVER\tWHY")
	for _, g := range r.GPUNodes {
		count := "?"
		if g.GPUs > 0 {
			count = fmt.Sprint(g.GPUs)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Name, g.Pool, count, OrNone(g.Product, "-"), yesNo(g.Tainted),
			OrNone(g.HostDriver, "-"), evidenceList(g.Reasons))
	}
	return tw.Flush()
}

// printPools writes a table of the node pools, then each pool's notes.
func printPools(w io.Writer, r *detect.Result) error {
	fmt.Fprintln(w, "\nNode pools:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  POOL\tNODES\tGPU NODES\tINSTANCE\tOS IMAGE\tKERNEL\tRUNTIME")
	for _, pl := range r.Pools {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\t%s\t%s\t%s\n", pl.Name, pl.Count, pl.GPUNodes, OrNone(pl.InstanceType, "-"),
			OrNone(strings.Join(pl.OSImages, ", "), "-"), OrNone(strings.Join(pl.Kernels, ", "), "-"), OrNone(strings.Join(pl.Runtimes, ", "), "-"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, pl := range r.Pools {
		for _, note := range pl.Notes {
			fmt.Fprintf(w, "  %s: %s\n", pl.Name, note)
		}
	}
	return nil
}

// printInstalled writes what of the GPU stack is already there: NFD, the operator, ClusterPolicies
// (and which one the operator honours), device plugins, Google's driver installer, DCGM exporters,
// operands, and nodes with a host driver.
func printInstalled(w io.Writer, r *detect.Result) error {
	fmt.Fprintln(w, "\nAlready installed:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	e := r.Existing
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	p("  NFD:\t%s\n", nfdText(e.NFD))
	p("  GPU operator:\t%s\n", operatorText(e.GPUOperator))
	if len(e.ClusterPolicies) == 0 {
		p("  ClusterPolicy:\tnone\n")
	}
	for _, cp := range e.ClusterPolicies {
		p("  ClusterPolicy:\t%s: %s\n", cp.Name, clusterPolicyText(cp, e.ActiveClusterPolicy))
	}
	if len(e.DevicePlugins) == 0 {
		p("  Device plugins:\tnone\n")
	}
	for _, dp := range e.DevicePlugins {
		p("  Device plugin:\t%s/%s (%s), %d/%d ready, on %s\n", dp.Namespace, dp.Name, dp.Provider, dp.Ready, dp.Desired, OrNone(strings.Join(dp.Nodes, ", "), "no node"))
	}
	if g := e.GKEDriverInstaller; g != nil {
		p("  GKE driver installer:\t%s/%s, %d/%d ready\n", g.Namespace, g.Name, g.Ready, g.Desired)
	}
	for _, x := range e.DCGMExporters {
		p("  dcgm-exporter:\t%s/%s, %d/%d ready\n", x.Namespace, x.Name, x.Ready, x.Desired)
	}
	if len(e.Operands) > 0 {
		var names []string
		for _, o := range e.Operands {
			names = append(names, fmt.Sprintf("%s %d/%d", o.Name, o.Ready, o.Desired))
		}
		p("  Operands:\t%s\n", strings.Join(names, ", "))
	}
	p("  Host driver:\t%s\n", OrNone(strings.Join(e.HostDriverNodes, ", "), "no node labelled nvidia.com/gpu.deploy.driver=pre-installed"))
	return tw.Flush()
}

// clusterPolicyText is a ClusterPolicy's state and ready reason, and whether the operator honours it
// (only the active one).
func clusterPolicyText(cp detect.ClusterPolicy, active string) string {
	state := OrNone(cp.State, "no status")
	if cp.ReadyReason != "" {
		state += " (" + cp.ReadyReason + ")"
	}
	if cp.Name != active {
		state += ", not honoured"
	}
	return state
}

func evidenceText(e detect.Evidence) string {
	s := e.Signal + " " + e.Value
	if e.Source != "" {
		s += " (" + e.Source + ")"
	}
	return s
}

func evidenceList(ev []detect.Evidence) string {
	var parts []string
	for _, e := range ev {
		parts = append(parts, e.Value+" ("+e.Source+")")
	}
	return strings.Join(parts, "; ")
}

func nfdText(n detect.NFDInstall) string {
	if !n.Present {
		if n.LabelledNodes > 0 {
			return fmt.Sprintf("not running, but %s NFD labels from an earlier run", Plural(n.LabelledNodes, "node")+" carry")
		}
		return "none"
	}
	var parts []string
	for _, w := range n.Workloads {
		parts = append(parts, fmt.Sprintf("%s %s/%s %d/%d ready", w.Kind, w.Namespace, w.Name, w.Ready, w.Desired))
	}
	if n.Helm != nil {
		parts = append(parts, "from Helm release "+releaseText(n.Helm))
	}
	if n.OLM != nil {
		parts = append(parts, fmt.Sprintf("from OLM subscription %s/%s", n.OLM.Namespace, n.OLM.Name))
	}
	parts = append(parts, Plural(n.LabelledNodes, "node")+" labelled")
	return strings.Join(parts, "; ")
}

func operatorText(o detect.OperatorInstall) string {
	if !o.Present {
		return "none"
	}
	var parts []string
	if d := o.Deployment; d != nil {
		parts = append(parts, fmt.Sprintf("Deployment %s/%s %d/%d ready", d.Namespace, d.Name, d.Ready, d.Desired))
	}
	if o.Helm != nil {
		parts = append(parts, "Helm release "+releaseText(o.Helm))
	}
	if s := o.OLM; s != nil {
		parts = append(parts, fmt.Sprintf("OLM subscription %s/%s (%s, %s)", s.Namespace, s.Name, s.Package, OrNone(s.InstalledCSV, "not installed")))
	}
	return strings.Join(parts, "; ")
}

func releaseText(r *detect.HelmRelease) string {
	s := r.Namespace + "/" + r.Name
	var details []string
	if r.Chart != "" {
		details = append(details, strings.TrimSuffix(r.Chart+" "+r.ChartVersion, " "))
	}
	if r.Status != "" {
		details = append(details, fmt.Sprintf("%s, revision %d", r.Status, r.Revision))
	}
	if r.Gpuctl {
		details = append(details, "gpuctl's")
	} else {
		details = append(details, "not gpuctl's")
	}
	if len(details) > 0 {
		s += " (" + strings.Join(details, ", ") + ")"
	}
	return s
}

// printTainting writes what decides the GPU taint: where pods that tolerate nothing can still run,
// whether the API server adds the GPU toleration to pods that request GPUs (or gpuctl could, with a
// MutatingAdmissionPolicy), the workloads the taint would strand, and install's decision from them.
func printTainting(w io.Writer, r *detect.Result) error {
	fmt.Fprintf(w, "\nTainting GPU nodes: %s\n", schedulingText(r.Scheduling))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	p("  GPU toleration:\t%s\n", findingText(r.Admission.GPUToleration,
		"the API server adds it to pods that request GPUs (ExtendedResourceToleration)", "not added by the API server"))
	p("  MutatingAdmissionPolicy:\t%s\n", findingText(r.Admission.MutatingAdmissionPolicy,
		"served: gpuctl can add the toleration itself", "not served"))
	d := plan.DecideTaint(r, plan.TaintOptions{PolicyAvailable: true, Own: []string{plan.DefaultNamespace}})
	for _, s := range d.Stranded {
		p("  would strand:\t%s %s/%s\n", s.Kind, s.Namespace, s.Name)
	}
	switch {
	case d.Taint:
		p("  install:\ttaints them (%s)\n", d.Why)
	default:
		p("  install:\tdoes not taint them by default: %s\n", d.Skip)
	}
	return tw.Flush()
}

// findingText says what a finding found, or that it is not known.
func findingText(f *detect.Finding, yes, no string) string {
	switch {
	case f == nil:
		return "unknown (the API server did not say)"
	case f.Detected:
		return yes
	}
	return no
}

func schedulingText(s detect.Scheduling) string {
	switch {
	case len(s.GPUWorkers) == 0:
		return "no schedulable GPU worker"
	case s.AllWorkersGPU:
		return fmt.Sprintf("every schedulable worker is a GPU node (%d): the GPU operator, NFD master and NFD gc need a nvidia.com/gpu toleration", len(s.GPUWorkers))
	default:
		return fmt.Sprintf("safe: the operator and NFD can still run on %s without GPUs or taints (%s)", Plural(len(s.OpenWorkers), "worker"), strings.Join(firstN(s.OpenWorkers, 3), ", "))
	}
}

func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(append([]string{}, s[:n]...), "…")
}

// Plural is n and the noun, with an "s" unless n is 1: "1 node", "3 nodes".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// OrNone is s, or none when s is empty.
func OrNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
