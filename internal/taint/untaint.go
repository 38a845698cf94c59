package taint

import (
	"context"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// Untaint removes the taints gpuctl recorded in AddedTaintsAnnotation, and the annotation, and nothing else.
type Untaint struct {
	Client kubernetes.Interface
	// Concurrency bounds the patches in flight; 0 means defaultConcurrency (64).
	Concurrency int
	// DryRun computes what would change and writes nothing.
	DryRun bool
	// OnNode, if set, is called once per node as soon as that node is done, never concurrently.
	OnNode func(NodeResult)
}

// Run untaints the named nodes, or, when nodeNames is nil, every node that carries AddedTaintsAnnotation (found
// with the same single LIST of nodes).
//
// A recorded taint is removed only if the node still has it with the same key, value and effect; if someone
// changed its value since, it is theirs now and stays. The annotation is removed in every case, so a re-run finds
// nothing to do. A named node that does not exist, or has no annotation, is ActionNothingToRemove: there is
// nothing of ours on it (uninstall must not fail because the autoscaler removed a node).
func (u *Untaint) Run(ctx context.Context, nodeNames []string) (Result, error) {
	if nodeNames != nil && len(dedupe(nodeNames)) == 0 {
		return Result{Counts: map[Action]int{}}, nil
	}
	nodes, err := listNodes(ctx, u.Client)
	if err != nil {
		return Result{}, fmt.Errorf("untaint nodes: %w", err)
	}
	names := dedupe(nodeNames)
	if nodeNames == nil {
		for name, node := range nodes {
			if _, ok := node.Annotations[AddedTaintsAnnotation]; ok {
				names = append(names, name)
			}
		}
		sort.Strings(names)
	}
	r := runner{client: u.Client, concurrency: u.Concurrency, dryRun: u.DryRun, onNode: u.OnNode, verb: "untaint", missingOK: true}
	return r.run(ctx, names, nodes, PlanUntaint)
}

// PlanUntaint decides what Untaint does to node (as read): remove the taints gpuctl recorded that the
// node still has, with the same key, value and effect, and the record. A record that names no taint
// the node has (someone removed it, or changed its value: theirs now) is still cleared, with nothing
// removed. A node without a record is left alone. It is pure.
func PlanUntaint(node *corev1.Node) (Change, error) {
	if _, ok := node.Annotations[AddedTaintsAnnotation]; !ok {
		return Change{Action: ActionNothingToRemove}, nil
	}
	added, err := Added(node)
	if err != nil {
		// Refuse rather than guess: removing a taint we cannot prove is ours could expose a node a user fenced.
		return Change{}, fmt.Errorf("%w (fix or delete the annotation by hand)", err)
	}
	var removed []corev1.Taint
	keep := slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t corev1.Taint) bool {
		ours := slices.ContainsFunc(added, func(a corev1.Taint) bool { return sameTaint(a, t) })
		if ours {
			t.TimeAdded = nil
			removed = append(removed, t)
		}
		return ours
	})
	action := ActionNothingToRemove
	if len(removed) > 0 {
		action = ActionRemoved
	}
	if len(keep) == 0 {
		keep = nil
	}
	// Write even when no taint matched, to clear the stale record.
	return Change{Action: action, Remove: removed, write: true, taints: keep, added: nil}, nil
}
