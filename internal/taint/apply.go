package taint

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// Taint adds a taint to nodes and records it in AddedTaintsAnnotation. The zero value of every field but Client
// is a sensible default.
type Taint struct {
	Client kubernetes.Interface
	// Taint is the taint to add; the zero value means GPUTaint.
	Taint corev1.Taint
	// Concurrency bounds the patches in flight; 0 means defaultConcurrency (64).
	Concurrency int
	// Nodes, if set, are the cluster's nodes as just read (detection's snapshot), so Run need not list
	// them again. A node changed since is still handled right: each patch is conditional on the taints
	// it was planned from, and a refused one is re-read and planned again.
	Nodes []corev1.Node
	// DryRun computes what would change and writes nothing (client-side: the nodes are read, never patched).
	DryRun bool
	// OnNode, if set, is called once per node as soon as that node is done, never concurrently.
	OnNode func(NodeResult)
}

// Run adds the taint to each named node that does not already carry a taint with the same key and effect.
//
// A node that already has one (gpuctl's from an earlier run, GKE's nvidia.com/gpu=present:NoSchedule, or a user's
// nvidia.com/gpu with another value) is left alone and reported as ActionAlreadyPresent; since that taint is not
// recorded, Untaint leaves it too. We do not add a second nvidia.com/gpu:NoSchedule with our value: the API server
// rejects two taints with the same key and effect, and the existing one already repels pods without the
// nvidia.com/gpu Exists toleration, which is what NVIDIA's operands carry (daemonsets.tolerations in
// NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0). A taint with the same key but another effect
// (e.g. nvidia.com/gpu:PreferNoSchedule) is a different taint, so ours is added beside it.
//
// Run reads all nodes with one LIST and then patches the ones that need it concurrently; a node that fails does
// not stop the others. The error joins every node's error; Result reports every node either way.
func (t *Taint) Run(ctx context.Context, nodeNames []string) (Result, error) {
	want := t.Taint
	if want.Key == "" {
		want = GPUTaint
	}
	if want.Effect == "" {
		return Result{}, fmt.Errorf("taint nodes: taint %s has no effect", want.Key)
	}
	names := dedupe(nodeNames)
	if len(names) == 0 {
		return Result{Counts: map[Action]int{}}, nil
	}
	var nodes map[string]*corev1.Node
	if t.Nodes != nil {
		nodes = make(map[string]*corev1.Node, len(t.Nodes))
		for i := range t.Nodes {
			nodes[t.Nodes[i].Name] = &t.Nodes[i]
		}
	} else {
		var err error
		if nodes, err = listNodes(ctx, t.Client); err != nil {
			return Result{}, fmt.Errorf("taint nodes: %w", err)
		}
	}
	r := runner{client: t.Client, concurrency: t.Concurrency, dryRun: t.DryRun, onNode: t.OnNode, verb: "taint"}
	return r.run(ctx, names, nodes, func(node *corev1.Node) (Change, error) {
		return PlanTaint(node, want)
	})
}

// PlanTaint decides what Taint does to node (as read) to add want: add it and record it, or nothing
// where the node already has a taint with want's key and effect (Change.Existing). It is pure.
func PlanTaint(node *corev1.Node, want corev1.Taint) (Change, error) {
	// Read the record first even when there is nothing to add: a broken record means someone edited it, and
	// Untaint would refuse the node later, so say so now.
	added, err := Added(node)
	if err != nil {
		return Change{}, err
	}
	if i := indexKeyEffect(node.Spec.Taints, want); i >= 0 {
		existing := node.Spec.Taints[i]
		existing.TimeAdded = nil
		return Change{Action: ActionAlreadyPresent, Existing: &existing}, nil
	}
	taints := append(slices.Clone(node.Spec.Taints), want)
	// Keep earlier records: a taint we added before and someone removed since is recorded again, once.
	added = append(added, want)
	return Change{Action: ActionAdded, Add: []corev1.Taint{want}, write: true, taints: taints, added: added}, nil
}
