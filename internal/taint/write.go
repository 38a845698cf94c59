package taint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/gpuctl/gpuctl/internal/kube"
)

// defaultConcurrency bounds the patches in flight when Concurrency is 0. gpuctl's clients have no client-side
// rate limit (internal/kube): the API server's priority and fairness paces bulk writes, answering 429 with
// Retry-After, which client-go honours. On a saturated API server a client's share of it goes with its requests
// in flight, and other writers keep theirs (a 2,000-node cluster's kubelets renew 200 leases a second), so gpuctl
// keeps as many in flight as the bench's reference patcher (docs/performance.md). That is a third of the default
// max-mutating-requests-inflight (200), and with priority and fairness it cannot crowd out kubelets or
// controllers: their requests have priority levels of their own ("system", "leader-election", "workload-high";
// https://kubernetes.io/docs/concepts/cluster-administration/flow-control/#defaults), while an ordinary user's
// requests wait in global-default.
const defaultConcurrency = 64

// fieldManager names gpuctl in the nodes' managedFields, so `kubectl get node -o yaml` shows who wrote the taint.
const fieldManager = "gpuctl"

// Change is what Taint or Untaint does to one node, decided from the node as read (PlanTaint,
// PlanUntaint): what a plan lists (Action, Add, Remove) and what the write sets.
type Change struct {
	// Action is ActionAdded, ActionAlreadyPresent, ActionRemoved or ActionNothingToRemove.
	Action Action
	// Add are the taints added (and recorded); Remove the recorded taints removed.
	Add, Remove []corev1.Taint
	// Existing is, for ActionAlreadyPresent, the node's taint with the wanted key and effect.
	Existing *corev1.Taint
	// write is false when the node is already as it should be.
	write bool
	// taints is the node's complete new spec.taints (nil removes the field).
	taints []corev1.Taint
	// added is the new content of AddedTaintsAnnotation; nil removes the annotation.
	added []corev1.Taint
}

// Writes reports whether the change writes the node: a taint to add or remove, or (untaint) a stale
// record of gpuctl's to clear.
func (c Change) Writes() bool { return c.write }

// planFunc computes the change for a node as last read. It must not modify node.
type planFunc func(node *corev1.Node) (Change, error)

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
	// planned: the run carries out a plan (Apply), so a node that went away is ActionChanged.
	planned bool
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

// one applies plan to a single node, re-reading the node and planning again when it changed since it was read.
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

	err := retry.OnError(retry.DefaultRetry, func(err error) bool { return errors.Is(err, errChanged) }, func() error {
		c, err := plan(node)
		if err != nil {
			return err
		}
		res.Action = c.Action
		if !c.write {
			return nil
		}
		if r.dryRun {
			res.Action = wouldDo(c.Action)
			return nil
		}
		err = patchNode(ctx, r.client, node, c)
		if err == nil || !(apierrors.IsConflict(err) || apierrors.IsInvalid(err) || testFailed(err)) {
			return err
		}
		fresh, err := r.refused(ctx, name, node, err)
		if fresh != nil {
			node = fresh
		}
		return err
	})
	if err != nil {
		return r.failed(name, err)
	}
	return res
}

// wouldDo is what a dry run reports for a change that writes: the action it would take.
func wouldDo(a Action) Action {
	switch a {
	case ActionAdded:
		return ActionWouldAdd
	case ActionRemoved:
		return ActionWouldRemove
	}
	return a
}

// refused judges a patch of node name, as read, that the API server refused with err. If someone changed the node's
// taints (or our annotation) since we read it — the node lifecycle controller adds
// node.kubernetes.io/* taints to nodes whose heartbeats lapse — it returns the node as it is now and
// an errChanged, so the change is planned again on it and theirs survives. A refusal of a node that
// has not changed is a real error.
func (r runner) refused(ctx context.Context, name string, node *corev1.Node, err error) (*corev1.Node, error) {
	fresh, gerr := r.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if gerr != nil {
		return nil, fmt.Errorf("%w; re-read: %w", err, gerr)
	}
	// A failed test says the node was not as read when the patch landed, even when it is again by
	// now (a NotReady taint that came and went on an overloaded control plane).
	if testFailed(err) || patchNotApplied(err) || apierrors.IsConflict(err) || !sameTaintState(node, fresh) {
		return fresh, fmt.Errorf("%w: %w", errChanged, err)
	}
	return nil, err
}

// failed is the result for node name of a write that failed with err: a node that changed since
// the plan or went away is ActionChanged in a planned run, a node gone is nothing to remove where a
// missing node is, and anything else is ActionFailed.
func (r runner) failed(name string, err error) NodeResult {
	var moved *ChangedError
	switch {
	case errors.As(err, &moved):
		return NodeResult{Node: name, Action: ActionChanged, Err: moved}
	case r.planned && apierrors.IsNotFound(err):
		return NodeResult{Node: name, Action: ActionChanged, Err: &ChangedError{Node: name, Now: "the node is gone"}}
	case r.missingOK && apierrors.IsNotFound(err):
		// The node went away while we were working on it: nothing of ours is left there.
		return NodeResult{Node: name, Action: ActionNothingToRemove}
	}
	return NodeResult{Node: name, Action: ActionFailed, Err: fmt.Errorf("%s node %s: %w", r.verb, name, err)}
}

// The write is a JSON patch (RFC 6902) whose "test" operations make it conditional on exactly what the
// plan read: the node's spec.taints and gpuctl's annotation, nothing else.
//
// Why conditional, and why not on the resourceVersion:
//   - spec.taints is +listType=atomic with no patch merge key, so every patch type replaces the whole list. To add
//     or remove one taint without losing a concurrent writer's change (the node lifecycle controller adds
//     node.kubernetes.io/* taints, cluster autoscalers add theirs), the write must be conditional on the list we
//     read. A failed test makes the API server reject the patch (422, "testing value … failed") with nothing
//     written; we then re-read and plan again, as after a 409 Conflict.
//   - The node's resourceVersion changes with every status update, and kubelets (and kwok) write node status all
//     the time: a patch conditional on it conflicts often on large clusters, each conflict costing a re-read and
//     a second patch. The API server applies a JSON patch to the object it is about to store, retrying on its own
//     storage conflicts, so the tests hold against the stored taints whatever else changed meanwhile.
//   - Update would send the whole Node as this client's Go types know it, silently dropping fields that a newer
//     API server has and client-go v0.37 does not. The patch touches only spec.taints and our annotation.
//   - A test of a member that does not exist against null passes (gopkg.in/evanphx/json-patch.v4, which the API
//     server uses), so "no taints yet" and "no annotation yet" are preconditions too.
type patchOp struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	// Value is sent even when nil: a test against null means "absent".
	Value any `json:"value"`
}

// annotationPath is the JSON pointer of gpuctl's annotation ("/" in the key escaped as "~1").
var annotationPath = "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(AddedTaintsAnnotation, "~", "~0"), "/", "~1")

// nodePatch is the conditional JSON patch that turns node (as read) into c.
func nodePatch(node *corev1.Node, c Change) ([]patchOp, error) {
	var oldTaints any
	if len(node.Spec.Taints) > 0 {
		oldTaints = node.Spec.Taints
	}
	ops := []patchOp{{Op: "test", Path: "/spec/taints", Value: oldTaints}}
	var newAnnotation any
	if c.added != nil {
		v, err := encodeAdded(c.added)
		if err != nil {
			return nil, err
		}
		newAnnotation = v
	}
	old, had := node.Annotations[AddedTaintsAnnotation]
	if node.Annotations == nil {
		ops = append(ops, patchOp{Op: "test", Path: "/metadata/annotations", Value: nil})
	} else {
		var oldValue any
		if had {
			oldValue = old
		}
		ops = append(ops, patchOp{Op: "test", Path: annotationPath, Value: oldValue})
	}
	switch {
	case c.taints != nil:
		ops = append(ops, patchOp{Op: "add", Path: "/spec/taints", Value: c.taints})
	case len(node.Spec.Taints) > 0:
		ops = append(ops, patchOp{Op: "remove", Path: "/spec/taints"})
	}
	switch {
	case newAnnotation != nil && node.Annotations == nil:
		ops = append(ops, patchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]any{AddedTaintsAnnotation: newAnnotation}})
	case newAnnotation != nil:
		ops = append(ops, patchOp{Op: "add", Path: annotationPath, Value: newAnnotation})
	case had:
		ops = append(ops, patchOp{Op: "remove", Path: annotationPath})
	}
	return ops, nil
}

func patchNode(ctx context.Context, client kubernetes.Interface, node *corev1.Node, c Change) error {
	ops, err := nodePatch(node, c)
	if err != nil {
		return err
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	_, err = client.CoreV1().Nodes().Patch(ctx, node.Name, types.JSONPatchType, data, metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil {
		return fmt.Errorf("patch: %w%s", err, serverCauses(err))
	}
	return nil
}

// serverCauses is what the API server said beyond its status line: a refused JSON patch reports
// "the server rejected our request due to an error in our request" and puts the reason ("testing
// value /spec/taints failed") in the status details' causes.
func serverCauses(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return ""
	}
	var msgs []string
	for _, c := range status.Status().Details.Causes {
		if c.Message != "" && !strings.Contains(err.Error(), c.Message) {
			msgs = append(msgs, c.Message)
		}
	}
	if len(msgs) == 0 {
		return ""
	}
	return " (" + strings.Join(msgs, "; ") + ")"
}

// errChanged marks a write refused because the node's taints or gpuctl's annotation changed since
// they were read; the node is read again and the change planned anew.
var errChanged = errors.New("the node changed since it was read")

// testFailed: the error is a failed "test" operation of a JSON patch, as a fake clientset reports it
// (the API server answers 422 Invalid).
func testFailed(err error) bool {
	msg := err.Error() + serverCauses(err)
	return strings.Contains(msg, "testing value") && strings.Contains(msg, "failed")
}

// patchNotApplied: the API server could not apply the JSON patch to the node as stored. It answers
// 422 with a bare "the server rejected our request due to an error in our request" and no causes
// (k8s.io/apiserver pkg/endpoints/handlers/patch.go, applyJSPatch), which for gpuctl's patches means
// a failed test; a patched node that fails validation is refused with field causes instead.
func patchNotApplied(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || len(d.Causes) == 0
}

// sameTaintState: the two reads of a node agree on everything the patch tests: the taints, gpuctl's
// annotation, and whether the node has annotations at all (a node read without any is patched with a
// test that it still has none: the TTL controller, for one, adds its annotation to new nodes).
func sameTaintState(a, b *corev1.Node) bool {
	return reflect.DeepEqual(normalTaints(a.Spec.Taints), normalTaints(b.Spec.Taints)) &&
		a.Annotations[AddedTaintsAnnotation] == b.Annotations[AddedTaintsAnnotation] &&
		(a.Annotations == nil) == (b.Annotations == nil)
}

func normalTaints(ts []corev1.Taint) []corev1.Taint {
	if len(ts) == 0 {
		return nil
	}
	return ts
}

// listNodes lists the nodes each Run starts with (kube.ListNodes), keyed by name.
func listNodes(ctx context.Context, client kubernetes.Interface) (map[string]*corev1.Node, error) {
	list, err := kube.ListNodes(ctx, client, Trim)
	if err != nil {
		return nil, err
	}
	nodes := make(map[string]*corev1.Node, len(list))
	for _, n := range list {
		nodes[n.Name] = n
	}
	return nodes, nil
}

// Trim keeps of a listed node what planning and patching its taints read (kube.ListNodes' keep): its
// name, its taints, and gpuctl's annotation (with whether the node has annotations at all, which the
// patch tests). The rest of 2,000 listed nodes (status, some 60 labels each) need not stay in memory
// while they are patched.
func Trim(n *corev1.Node) *corev1.Node {
	out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
	out.Spec.Taints = n.Spec.Taints
	if n.Annotations != nil {
		out.Annotations = map[string]string{}
		if v, ok := n.Annotations[AddedTaintsAnnotation]; ok {
			out.Annotations[AddedTaintsAnnotation] = v
		}
	}
	return out
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
