package taint

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// Planned is one node's planned change: the node as the plan read it, and the taint to add (Taint) or,
// when Untaint is true, the recorded taints to remove.
type Planned struct {
	Node    *corev1.Node
	Taint   corev1.Taint
	Untaint bool
}

// plan is the Change Planned stands for, from node as read now.
func (p Planned) plan(node *corev1.Node) (Change, error) {
	if p.Untaint {
		return PlanUntaint(node)
	}
	return PlanTaint(node, p.Taint)
}

// Apply carries out a plan: on each planned node exactly the change planned from the node as the
// plan read it, and nothing on any other node. Each write is conditional on the node's taints and
// gpuctl's record as read (write.go); when the node changed since, it is read again and the change
// planned anew: if that is still the planned change (a node.kubernetes.io/* taint came or went
// meanwhile), it is written on the node as it is now, keeping the other writer's change; if not (the
// taint is there already, the record changed, the node is gone), nothing is written and the node is
// reported as ActionChanged with a *ChangedError. The zero value of every field but Client is a
// sensible default.
type Apply struct {
	Client kubernetes.Interface
	// Concurrency bounds the patches in flight; 0 means defaultConcurrency (64).
	Concurrency int
	// OnNode, if set, is called once per node as soon as that node is done, never concurrently.
	OnNode func(NodeResult)
}

// Run applies the planned changes; Result reports every planned node, in order. A node whose planned
// change writes nothing is not touched. The error joins every node's error.
func (a *Apply) Run(ctx context.Context, planned []Planned) (Result, error) {
	byName := make(map[string]Planned, len(planned))
	var names []string
	nodes := make(map[string]*corev1.Node, len(planned))
	for _, p := range planned {
		if p.Node == nil || byName[p.Node.Name].Node != nil {
			continue
		}
		byName[p.Node.Name] = p
		nodes[p.Node.Name] = p.Node
		names = append(names, p.Node.Name)
	}
	r := runner{client: a.Client, concurrency: a.Concurrency, onNode: a.OnNode, verb: "apply planned taint change to", planned: true}
	return r.run(ctx, names, nodes, func(node *corev1.Node) (Change, error) {
		p := byName[node.Name]
		want, err := p.plan(p.Node)
		if err != nil {
			return Change{}, err
		}
		now, err := p.plan(node)
		if err != nil {
			return Change{}, &ChangedError{Node: node.Name, Now: err.Error()}
		}
		if !sameEffect(want, now) {
			return Change{}, &ChangedError{Node: node.Name, Now: describe(now)}
		}
		return now, nil
	})
}

// ChangedError says that a node changed between the plan and the write, so that the planned change
// no longer holds; nothing was written to it.
type ChangedError struct {
	Node string
	// Now is what gpuctl would do to the node as it is now, or what happened to it.
	Now string
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("node %s changed since the plan (now: %s): not written; plan again", e.Node, e.Now)
}

// sameEffect: two changes add and remove the same taints and write alike.
func sameEffect(a, b Change) bool {
	eq := func(x, y []corev1.Taint) bool { return slices.EqualFunc(x, y, sameTaint) }
	return a.Action == b.Action && a.write == b.write && eq(a.Add, b.Add) && eq(a.Remove, b.Remove)
}

// describe says what a change does, for ChangedError.
func describe(c Change) string {
	switch {
	case len(c.Add) > 0:
		return "would add " + taintList(c.Add)
	case len(c.Remove) > 0:
		return "would remove " + taintList(c.Remove)
	case c.Existing != nil:
		return "already has " + c.Existing.ToString()
	case c.write:
		return "would only clear gpuctl's record " + AddedTaintsAnnotation
	default:
		return "nothing to do"
	}
}

func taintList(ts []corev1.Taint) string {
	out := ""
	for i, t := range ts {
		if i > 0 {
			out += ", "
		}
		out += t.ToString()
	}
	return out
}
