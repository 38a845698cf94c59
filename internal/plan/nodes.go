package plan

import (
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuctl/gpuctl/internal/taint"
)

// NodePlan is every decision of `gpuctl taint` or `gpuctl untaint`, made before the first write: per
// node, the taint change, and every other node with why it is left alone. The run writes exactly
// Changes and touches no other node; --dry-run prints it. Field names are stable (docs/schemas/TaintResult.json).
type NodePlan struct {
	// Verb is "taint" or "untaint".
	Verb string `json:"verb"`
	// Taint is the taint gpuctl adds (taint only).
	Taint *TaintSpec `json:"taint,omitempty"`
	// Changes are the nodes the run writes, sorted by node.
	Changes []NodeChange `json:"changes"`
	// Unchanged are the other nodes, sorted by node, each with why it is left alone.
	Unchanged []NodeUnchanged `json:"unchanged,omitempty"`
	// Toleration says how pods that request GPUs get the toleration of the taint (taint only):
	// TolerationPlugin, TolerationPolicy, or "" (they must carry PodToleration themselves).
	Toleration string `json:"toleration,omitempty"`
	// PodToleration is the toleration a pod needs to run on the tainted nodes.
	PodToleration string `json:"podToleration,omitempty"`
	// Warnings say why gpuctl install would not have tainted these nodes by default.
	Warnings []string `json:"warnings,omitempty"`
	// Workloads are those running today whose pods do not tolerate the taint, and what it does to each;
	// a Stranded one refuses the taint unless Forced.
	Workloads []TaintWorkload `json:"workloads,omitempty"`
	// Forced is --force: taint although it strands the Stranded workloads.
	Forced bool `json:"forced,omitempty"`
}

// TaintSpec is a taint by its identity on a node: key, value and effect.
type TaintSpec struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

func (t TaintSpec) String() string { return t.Key + "=" + t.Value + ":" + t.Effect }

// Node change actions.
const (
	// ActionAdd adds Taints and records them in gpuctl's annotation (taint.AddedTaintsAnnotation).
	ActionAdd = "add"
	// ActionRemove removes Taints, which gpuctl recorded as its own, and the record.
	ActionRemove = "remove"
	// ActionForget clears a record that names no taint the node still has (someone removed it, or
	// changed its value: theirs now); no taint changes.
	ActionForget = "forget"
)

// NodeChange is one node's taint change.
type NodeChange struct {
	Node string `json:"node"`
	// Action is ActionAdd, ActionRemove or ActionForget.
	Action string      `json:"action"`
	Taints []TaintSpec `json:"taints,omitempty"`
}

func (c NodeChange) String() string {
	var ts []string
	for _, t := range c.Taints {
		ts = append(ts, t.String())
	}
	if c.Action == ActionForget {
		return "node/" + c.Node + ": forget gpuctl's record " + taint.AddedTaintsAnnotation + " (it names no taint the node has)"
	}
	return "node/" + c.Node + ": " + c.Action + " " + strings.Join(ts, ", ")
}

// NodeUnchanged is a node the run leaves alone, and why.
type NodeUnchanged struct {
	Node   string `json:"node"`
	Reason string `json:"reason"`
	// Problem: gpuctl cannot tell what is its own on the node (its record was edited); the run fails
	// after doing the rest.
	Problem bool `json:"problem,omitempty"`
}

// Reasons a node is left alone.
const (
	ReasonNotGPU       = "not a GPU node"
	ReasonNoRecord     = "carries no taint recorded by gpuctl"
	reasonAlreadyTaint = "already has "
)

// TaintNodesPlan plans `gpuctl taint`: want on every GPU node (gpuNodes, by name) that has no taint
// with its key and effect, nothing on other nodes. d is plan.DecideTaint's decision for this cluster
// with Force (the user asked to taint): its Default becomes the warning, its Workloads the plan's.
func TaintNodesPlan(nodes []corev1.Node, gpuNodes []string, want corev1.Taint, d TaintDecision, forced bool) *NodePlan {
	p := &NodePlan{Verb: "taint", Taint: spec(want), Toleration: d.Toleration, Workloads: d.Workloads, Forced: forced, Changes: []NodeChange{}}
	if d.Default != "" {
		p.Warnings = append(p.Warnings, "gpuctl install would not taint these nodes by default: "+d.Default)
	}
	if d.Toleration == "" {
		p.PodToleration = gpuTolerationText
	}
	for _, n := range sortedNodes(nodes) {
		if !slices.Contains(gpuNodes, n.Name) {
			p.Unchanged = append(p.Unchanged, NodeUnchanged{Node: n.Name, Reason: ReasonNotGPU})
			continue
		}
		c, err := taint.PlanTaint(n, want)
		switch {
		case err != nil:
			p.Unchanged = append(p.Unchanged, NodeUnchanged{Node: n.Name, Reason: err.Error(), Problem: true})
		case c.Existing != nil:
			p.Unchanged = append(p.Unchanged, NodeUnchanged{Node: n.Name, Reason: alreadyTainted(n, *c.Existing)})
		default:
			p.Changes = append(p.Changes, NodeChange{Node: n.Name, Action: ActionAdd, Taints: specs(c.Add)})
		}
	}
	return p
}

// UntaintNodesPlan plans `gpuctl untaint`: on every node with gpuctl's record, remove the recorded
// taints it still has, and the record; leave every other node.
func UntaintNodesPlan(nodes []corev1.Node) *NodePlan {
	p := &NodePlan{Verb: "untaint", Changes: []NodeChange{}}
	for _, n := range sortedNodes(nodes) {
		c, err := taint.PlanUntaint(n)
		switch {
		case err != nil:
			p.Unchanged = append(p.Unchanged, NodeUnchanged{Node: n.Name, Reason: err.Error(), Problem: true})
		case len(c.Remove) > 0:
			p.Changes = append(p.Changes, NodeChange{Node: n.Name, Action: ActionRemove, Taints: specs(c.Remove)})
		case c.Writes():
			p.Changes = append(p.Changes, NodeChange{Node: n.Name, Action: ActionForget})
		default:
			p.Unchanged = append(p.Unchanged, NodeUnchanged{Node: n.Name, Reason: ReasonNoRecord})
		}
	}
	return p
}

// sortedNodes are the nodes by name, so that plans list nodes in one order.
func sortedNodes(nodes []corev1.Node) []*corev1.Node {
	out := make([]*corev1.Node, len(nodes))
	for i := range nodes {
		out[i] = &nodes[i]
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// alreadyTainted says why a GPU node that has a taint with the wanted key and effect is left alone.
func alreadyTainted(n *corev1.Node, existing corev1.Taint) string {
	added, _ := taint.Added(n)
	ours := slices.ContainsFunc(added, func(a corev1.Taint) bool {
		return a.Key == existing.Key && a.Value == existing.Value && a.Effect == existing.Effect
	})
	s := reasonAlreadyTaint + spec(existing).String()
	if ours {
		return s + " (added by gpuctl)"
	}
	return s + " (not gpuctl's: untaint leaves it)"
}

// Stranded are the workloads the taint would strand.
func (p *NodePlan) Stranded() []TaintWorkload {
	var out []TaintWorkload
	for _, w := range p.Workloads {
		if w.Stranded {
			out = append(out, w)
		}
	}
	return out
}

// Problems are the nodes whose record gpuctl cannot read, as one error message ("" when none).
func (p *NodePlan) Problems() string {
	var msgs []string
	for _, u := range p.Unchanged {
		if u.Problem {
			msgs = append(msgs, "node "+u.Node+": "+u.Reason)
		}
	}
	return strings.Join(msgs, "; ")
}

// TaintStrandedHint is the ways out of a refused `gpuctl taint`.
const TaintStrandedHint = "add " + gpuTolerationText + " to those pod templates, or pass --force to taint anyway"

func spec(t corev1.Taint) *TaintSpec {
	return &TaintSpec{Key: t.Key, Value: t.Value, Effect: string(t.Effect)}
}

func specs(ts []corev1.Taint) []TaintSpec {
	out := make([]TaintSpec, 0, len(ts))
	for _, t := range ts {
		out = append(out, *spec(t))
	}
	return out
}
