package taint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// defaultConcurrency bounds the patches in flight when Concurrency is 0: enough to taint a few hundred nodes in
// seconds, few enough to stay well inside client-go's default client-side rate limit (QPS 5, burst 10) bursts.
const defaultConcurrency = 8

// fieldManager names gpuctl in the nodes' managedFields, so `kubectl get node -o yaml` shows who wrote the taint.
const fieldManager = "gpuctl"

// change is what a node should look like after the operation.
type change struct {
	action Action
	// write is false when the node is already as it should be.
	write bool
	// taints is the node's complete new spec.taints (nil removes the field).
	taints []corev1.Taint
	// added is the new content of AddedTaintsAnnotation; nil removes the annotation.
	added []corev1.Taint
}

// planFunc computes the change for a node as last read. It must not modify node.
type planFunc func(node *corev1.Node) (change, error)

// runner applies a planFunc to many nodes with bounded concurrency. Taint and Untaint differ only in their plan.
type runner struct {
	client      kubernetes.Interface
	concurrency int
	dryRun      bool
	onNode      func(NodeResult)
	// verb names the operation in errors: "taint", "untaint".
	verb string
	// missingOK makes a node that does not exist a no-op instead of an error.
	missingOK bool
}

// run applies plan to each of names. nodes holds the nodes from the one LIST done up front, by name; a name not
// in it is a node that does not exist.
func (r runner) run(ctx context.Context, names []string, nodes map[string]*corev1.Node, plan planFunc) (Result, error) {
	results := make([]NodeResult, len(names))
	var (
		mu   sync.Mutex // serialises onNode: the engine's event sink is not safe for concurrent use
		errs = make([]error, len(names))
	)
	limit := r.concurrency
	if limit <= 0 {
		limit = defaultConcurrency
	}
	// A plain Group, not WithContext: one node's failure must not cancel the others, or the cluster is left with
	// an arbitrary subset tainted and no report of which.
	var g errgroup.Group
	g.SetLimit(limit)
	for i, name := range names {
		g.Go(func() error {
			res := r.one(ctx, name, nodes[name], plan)
			results[i] = res
			if res.Err != nil {
				errs[i] = res.Err
			}
			if r.onNode != nil {
				mu.Lock()
				r.onNode(res)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait() // the goroutines never return errors; they are collected per node

	out := Result{Nodes: results, Counts: make(map[Action]int)}
	for _, res := range results {
		out.Counts[res.Action]++
	}
	return out, errors.Join(errs...)
}

// one applies plan to a single node, re-reading the node and planning again after each 409 Conflict.
func (r runner) one(ctx context.Context, name string, node *corev1.Node, plan planFunc) NodeResult {
	res := NodeResult{Node: name}
	if node == nil {
		if r.missingOK {
			res.Action = ActionNothingToRemove
			return res
		}
		res.Action = ActionFailed
		res.Err = fmt.Errorf("%s node %s: node not found", r.verb, name)
		return res
	}
	if err := ctx.Err(); err != nil {
		res.Action = ActionFailed
		res.Err = fmt.Errorf("%s node %s: %w", r.verb, name, err)
		return res
	}

	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			// Someone else wrote the node between our read and our patch: read it again and redo the plan on
			// the current taints, so their change survives and ours is still correct.
			fresh, err := r.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("re-read after conflict: %w", err)
			}
			node = fresh
		}
		first = false

		c, err := plan(node)
		if err != nil {
			return err
		}
		res.Action = c.action
		if !c.write {
			return nil
		}
		if r.dryRun {
			switch c.action {
			case ActionAdded:
				res.Action = ActionWouldAdd
			case ActionRemoved:
				res.Action = ActionWouldRemove
			}
			return nil
		}
		return patchNode(ctx, r.client, node, c)
	})
	if err != nil {
		if r.missingOK && apierrors.IsNotFound(err) {
			// The node went away while we were working on it: nothing of ours is left there.
			return NodeResult{Node: name, Action: ActionNothingToRemove}
		}
		res.Action = ActionFailed
		res.Err = fmt.Errorf("%s node %s: %w", r.verb, name, err)
	}
	return res
}

// nodePatch is a JSON merge patch (RFC 7386) of the parts of a Node we own.
//
// Why a merge patch with resourceVersion, and not Update or a strategic-merge patch:
//   - spec.taints is +listType=atomic with no patch merge key, so every patch type replaces the whole list. To add
//     or remove one taint without losing a concurrent writer's change (the node lifecycle controller adds
//     node.kubernetes.io/* taints, cluster autoscalers add theirs), the write must be conditional on the version
//     we read. Putting metadata.resourceVersion in the patch makes the API server reject it with 409 Conflict when
//     the node changed (the same mechanism as `kubectl annotate --resource-version`; k8s.io/apiserver v0.37.2
//     pkg/endpoints/handlers/rest_test.go TestPatchResourceWithVersionConflict); we then re-read and retry.
//     Without a resourceVersion the server would apply our list over theirs unconditionally.
//   - Update would send the whole Node as this client's Go types know it, silently dropping fields that a newer
//     API server has and client-go v0.37 does not. The patch touches only spec.taints and our annotation.
//   - A merge patch on metadata.annotations merges by key, so other annotations are untouched, and a null value
//     deletes ours.
type nodePatch struct {
	Metadata patchMeta `json:"metadata"`
	Spec     patchSpec `json:"spec"`
}

type patchMeta struct {
	ResourceVersion string             `json:"resourceVersion,omitempty"`
	Annotations     map[string]*string `json:"annotations"`
}

type patchSpec struct {
	// No omitempty: nil must be sent as null, which removes the field when the last taint goes.
	Taints []corev1.Taint `json:"taints"`
}

func patchNode(ctx context.Context, client kubernetes.Interface, node *corev1.Node, c change) error {
	var annotation *string
	if c.added != nil {
		v, err := encodeAdded(c.added)
		if err != nil {
			return err
		}
		annotation = &v
	}
	p := nodePatch{
		Metadata: patchMeta{
			ResourceVersion: node.ResourceVersion,
			Annotations:     map[string]*string{AddedTaintsAnnotation: annotation},
		},
		Spec: patchSpec{Taints: c.taints},
	}
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	_, err = client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, data, metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil {
		return fmt.Errorf("patch: %w", err)
	}
	return nil
}

// listNodes does the one LIST of nodes each Run starts with, keyed by name.
func listNodes(ctx context.Context, client kubernetes.Interface) (map[string]*corev1.Node, error) {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	nodes := make(map[string]*corev1.Node, len(list.Items))
	for i := range list.Items {
		nodes[list.Items[i].Name] = &list.Items[i]
	}
	return nodes, nil
}

// dedupe returns names without duplicates or empty names, keeping the first occurrence's order, so a node is
// never patched twice concurrently by the same Run.
func dedupe(names []string) []string {
	seen := make(map[string]bool, len(names))
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
