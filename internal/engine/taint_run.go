package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/runner"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// Resume hints of an interrupted taint and untaint.
const (
	TaintResume   = "run gpuctl taint again: it plans anew from the nodes as they are, and taints the GPU nodes still without the taint"
	UntaintResume = "run gpuctl untaint again: it removes what gpuctl's record on each node still lists"
)

// carryOut carries out res.Plan (not in a dry run) as one step of runner.Runner: the planned changes
// written to the nodes as the plan read them. It records in res what was and was not done, and fails
// for every change not done and every node whose record gpuctl could not read.
func carryOut(ctx context.Context, c *kube.Clients, res *TaintResult, nodes []corev1.Node, sink event.Sink, onNode func(taint.NodeResult)) error {
	p := res.Plan
	var problems error
	if s := p.Problems(); s != "" {
		problems = fmt.Errorf("%s nodes: %s", p.Verb, s)
	}
	if res.DryRun {
		return problems
	}
	resume := TaintResume
	if p.Verb == "untaint" {
		resume = UntaintResume
	}
	r := &runner.Runner{Sink: sink, Resume: resume}
	err := r.Run(ctx, []runner.Step{nodeStep(c, res, nodes, onNode)})
	res.Steps = r.Results
	if ie := (*runner.InterruptedError)(nil); errors.As(err, &ie) {
		return err
	}
	return errors.Join(err, problems)
}

// nodeStep is the step that writes a node plan: "Taint 3 GPU nodes", "Remove gpuctl's taint from 3
// nodes". Its state, after an interrupt, is how many planned nodes carry the planned change.
func nodeStep(c *kube.Clients, res *TaintResult, nodes []corev1.Node, onNode func(taint.NodeResult)) runner.Step {
	p := res.Plan
	s := runner.Step{ID: p.Verb, Title: fmt.Sprintf("Remove gpuctl's taint from %s", nodeCount(len(p.Changes), "")),
		State: func(ctx context.Context) (string, error) { return nodeState(ctx, c, p) },
		Hint:  fmt.Sprintf("gpuctl %s --dry-run shows the plan for the nodes as they are now", p.Verb)}
	if p.Verb == "taint" {
		s.Title = "Taint " + nodeCount(len(p.Changes), "GPU ")
	}
	if len(p.Changes) == 0 {
		s.Skip = "no node to change"
		return s
	}
	s.Do = func(ctx context.Context, _ func(health.Progress)) (runner.Outcome, error) {
		return applyNodePlan(ctx, c, res, nodes, onNode)
	}
	return s
}

func nodeCount(n int, kind string) string {
	if n == 1 {
		return "1 " + kind + "node"
	}
	return fmt.Sprintf("%d %snodes", n, kind)
}

// applyNodePlan writes res.Plan's changes to the nodes as the plan read them, and records in res what
// was and was not done.
func applyNodePlan(ctx context.Context, c *kube.Clients, res *TaintResult, nodes []corev1.Node, onNode func(taint.NodeResult)) (runner.Outcome, error) {
	p := res.Plan
	byName := make(map[string]*corev1.Node, len(nodes))
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	planned := make([]taint.Planned, 0, len(p.Changes))
	changes := make(map[string]plan.NodeChange, len(p.Changes))
	for _, ch := range p.Changes {
		planned = append(planned, taint.Planned{Node: byName[ch.Node], Taint: taint.GPUTaint, Untaint: p.Verb == "untaint"})
		changes[ch.Node] = ch
	}
	out, err := (&taint.Apply{Client: c.Kube, OnNode: onNode}).Run(ctx, planned)
	for _, r := range out.Nodes {
		switch {
		case r.Err != nil && errors.Is(r.Err, context.Canceled):
			res.NotDone = append(res.NotDone, plan.NodeUnchanged{Node: r.Node, Reason: "not written: the run stopped first"})
			continue
		case r.Err != nil:
			res.NotDone = append(res.NotDone, plan.NodeUnchanged{Node: r.Node, Reason: r.Err.Error()})
			continue
		}
		res.Done = append(res.Done, changes[r.Node])
	}
	return runner.Outcome{Changed: len(res.Done) > 0, Message: fmt.Sprintf("%d/%d planned nodes written", len(res.Done), len(p.Changes))}, err
}

// nodeState reads back how many of the plan's nodes carry its change now.
func nodeState(ctx context.Context, c *kube.Clients, p *plan.NodePlan) (string, error) {
	list, err := kube.ListNodes(ctx, c.Kube, taint.Trim)
	if err != nil {
		return "", err
	}
	byName := make(map[string]*corev1.Node, len(list))
	for _, n := range list {
		byName[n.Name] = n
	}
	done := 0
	for _, ch := range p.Changes {
		if n := byName[ch.Node]; n != nil && changeDone(n, ch) {
			done++
		}
	}
	if p.Verb == "taint" {
		return fmt.Sprintf("%d/%d planned nodes tainted %s", done, len(p.Changes), p.Taint), nil
	}
	return fmt.Sprintf("%d/%d planned nodes no longer carry gpuctl's taint", done, len(p.Changes)), nil
}

// changeDone: the node carries the planned change: the taints added, the recorded taints gone, or
// (forget) gpuctl's record gone.
func changeDone(n *corev1.Node, ch plan.NodeChange) bool {
	has := func(t plan.TaintSpec) bool {
		return slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool {
			return x.Key == t.Key && x.Value == t.Value && string(x.Effect) == t.Effect
		})
	}
	switch ch.Action {
	case plan.ActionAdd:
		return len(ch.Taints) > 0 && !slices.ContainsFunc(ch.Taints, func(t plan.TaintSpec) bool { return !has(t) })
	case plan.ActionRemove:
		return !slices.ContainsFunc(ch.Taints, has)
	}
	_, recorded := n.Annotations[taint.AddedTaintsAnnotation]
	return !recorded
}
