package health

import (
	"fmt"
	"strings"
	"time"
)

// Report is a diagnosis of why something did not become ready, for humans (String) and machines (JSON).
type Report struct {
	// Namespace whose pods were inspected; empty when only nodes were.
	Namespace string       `json:"namespace,omitempty"`
	Nodes     []NodeReport `json:"nodes,omitempty"`
	// Pods are the pods in Namespace that are not Ready (and not Succeeded), those on the stuck nodes first.
	Pods []PodReport `json:"pods,omitempty"`
	// MorePods counts not-Ready pods left out to keep the report short.
	MorePods int `json:"morePods,omitempty"`
	// DaemonSets are the DaemonSets in Namespace that are not fully available or target no node.
	DaemonSets []DaemonSetReport `json:"daemonSets,omitempty"`
	Hints      []Hint            `json:"hints,omitempty"`
	// Errors says what could not be gathered (RBAC, timeouts); the rest of the report is still valid.
	Errors []string `json:"errors,omitempty"`
}

// NodeReport describes one node the wait was stuck on.
type NodeReport struct {
	Name string `json:"name"`
	// Missing: the node does not exist.
	Missing bool `json:"missing,omitempty"`
	Ready   bool `json:"ready"`
	// NotReady is the Ready condition's reason and message when the node is not Ready.
	NotReady      string `json:"notReady,omitempty"`
	Unschedulable bool   `json:"unschedulable,omitempty"`
	// Taints as key=value:effect.
	Taints []string `json:"taints,omitempty"`
	// GPULabels are the node's NVIDIA and NFD PCI labels as key=value.
	GPULabels []string `json:"gpuLabels,omitempty"`
	// AllocatableGPUs is status.allocatable["nvidia.com/gpu"], "" when absent.
	AllocatableGPUs string  `json:"allocatableGPUs,omitempty"`
	Events          []Event `json:"events,omitempty"`
}

// PodReport describes one pod that is not Ready.
type PodReport struct {
	Name  string `json:"name"`
	Node  string `json:"node,omitempty"`
	Phase string `json:"phase"`
	// Reason and Message are the pod's own (e.g. Evicted) or, for a Pending pod, the scheduler's.
	Reason         string            `json:"reason,omitempty"`
	Message        string            `json:"message,omitempty"`
	InitContainers []ContainerReport `json:"initContainers,omitempty"`
	Containers     []ContainerReport `json:"containers,omitempty"`
	Events         []Event           `json:"events,omitempty"`
}

// ContainerReport is the state of a container that has not completed (init) or is not ready.
type ContainerReport struct {
	Name string `json:"name"`
	// State is waiting, running or terminated.
	State    string `json:"state"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
	ExitCode *int32 `json:"exitCode,omitempty"`
	Restarts int32  `json:"restarts,omitempty"`
	Image    string `json:"image,omitempty"`
	// Since is when the current state began (running or terminated).
	Since time.Time `json:"since,omitzero"`
	// Logs are the last lines of the container's log, for failing containers only.
	Logs     []string `json:"logs,omitempty"`
	LogError string   `json:"logError,omitempty"`
}

// DaemonSetReport summarises a DaemonSet that is not fully available.
type DaemonSetReport struct {
	Name      string `json:"name"`
	Desired   int32  `json:"desired"`
	Ready     int32  `json:"ready"`
	Available int32  `json:"available"`
	// NodeSelector as key=value, sorted.
	NodeSelector []string `json:"nodeSelector,omitempty"`
	Events       []Event  `json:"events,omitempty"`
}

// Event is a Warning event, aggregated by reason and message.
type Event struct {
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Count   int32     `json:"count,omitempty"`
	Last    time.Time `json:"last,omitzero"`
}

// Hint is a recognised failure pattern and what to do about it.
type Hint struct {
	// Pattern identifies the rule, e.g. "image-pull", "driver-not-ready".
	Pattern string `json:"pattern"`
	Message string `json:"message"`
	// Objects the hint is about: "pod gpu-operator/x", "node gpu-1".
	Objects []string `json:"objects,omitempty"`
}

// String renders the report compactly for a terminal or a log: indented, no colour, one fact per line.
func (r Report) String() string {
	var b strings.Builder
	for _, n := range r.Nodes {
		writeNode(&b, n)
	}
	for _, p := range r.Pods {
		writePod(&b, r.Namespace, p)
	}
	if r.MorePods > 0 {
		fmt.Fprintf(&b, "… and %d more pods not ready in %s\n", r.MorePods, r.Namespace)
	}
	for _, d := range r.DaemonSets {
		fmt.Fprintf(&b, "daemonset %s/%s: %d desired, %d ready, %d available", r.Namespace, d.Name, d.Desired, d.Ready, d.Available)
		if len(d.NodeSelector) > 0 {
			fmt.Fprintf(&b, " (node selector %s)", strings.Join(d.NodeSelector, ","))
		}
		b.WriteByte('\n')
		writeEvents(&b, "  ", d.Events)
	}
	for _, h := range r.Hints {
		fmt.Fprintf(&b, "hint: %s\n", h.Message)
		if len(h.Objects) > 0 {
			fmt.Fprintf(&b, "  (%s)\n", names(h.Objects, 5))
		}
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "could not check: %s\n", e)
	}
	return b.String()
}

func writeNode(b *strings.Builder, n NodeReport) {
	fmt.Fprintf(b, "node %s: ", n.Name)
	switch {
	case n.Missing:
		b.WriteString("not found\n")
		return
	case n.Ready:
		b.WriteString("Ready")
	default:
		b.WriteString("NotReady")
		if n.NotReady != "" {
			fmt.Fprintf(b, " (%s)", n.NotReady)
		}
	}
	if n.Unschedulable {
		b.WriteString(", cordoned")
	}
	b.WriteByte('\n')
	if len(n.Taints) > 0 {
		fmt.Fprintf(b, "  taints: %s\n", strings.Join(n.Taints, ", "))
	}
	if len(n.GPULabels) > 0 {
		fmt.Fprintf(b, "  labels: %s\n", strings.Join(n.GPULabels, ", "))
	} else {
		b.WriteString("  labels: no NVIDIA or NFD PCI labels\n")
	}
	if n.AllocatableGPUs != "" {
		fmt.Fprintf(b, "  allocatable %s: %s\n", GPUResource, n.AllocatableGPUs)
	}
	writeEvents(b, "  ", n.Events)
}

func writePod(b *strings.Builder, ns string, p PodReport) {
	fmt.Fprintf(b, "pod %s/%s", ns, p.Name)
	if p.Node != "" {
		fmt.Fprintf(b, " on %s", p.Node)
	}
	fmt.Fprintf(b, ": %s", p.Phase)
	if p.Reason != "" {
		fmt.Fprintf(b, " (%s", p.Reason)
		if p.Message != "" {
			fmt.Fprintf(b, ": %s", p.Message)
		}
		b.WriteByte(')')
	}
	b.WriteByte('\n')
	for _, c := range p.InitContainers {
		writeContainer(b, "init ", c)
	}
	for _, c := range p.Containers {
		writeContainer(b, "", c)
	}
	writeEvents(b, "  ", p.Events)
}

func writeContainer(b *strings.Builder, kind string, c ContainerReport) {
	fmt.Fprintf(b, "  %scontainer %s: %s", kind, c.Name, c.State)
	if c.Reason != "" {
		fmt.Fprintf(b, " %s", c.Reason)
	}
	if c.ExitCode != nil {
		fmt.Fprintf(b, " (exit code %d)", *c.ExitCode)
	}
	if c.Restarts > 0 {
		fmt.Fprintf(b, ", %d restarts", c.Restarts)
	}
	if c.Message != "" {
		fmt.Fprintf(b, ": %s", c.Message)
	}
	b.WriteByte('\n')
	if len(c.Logs) > 0 {
		fmt.Fprintf(b, "    last %d log lines:\n", len(c.Logs))
		for _, l := range c.Logs {
			fmt.Fprintf(b, "    | %s\n", l)
		}
	}
	if c.LogError != "" {
		fmt.Fprintf(b, "    logs unavailable: %s\n", c.LogError)
	}
}

func writeEvents(b *strings.Builder, indent string, events []Event) {
	for _, e := range events {
		fmt.Fprintf(b, "%sevent %s", indent, e.Reason)
		if e.Count > 1 {
			fmt.Fprintf(b, " (x%d)", e.Count)
		}
		fmt.Fprintf(b, ": %s\n", e.Message)
	}
}

// oneLine flattens s to a single line of at most max runes, so API messages cannot break the layout.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}
