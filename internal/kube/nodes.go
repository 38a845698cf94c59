package kube

import (
	"context"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// ListNodes lists every node and returns what keep makes of each, sorted by name.
//
// A node carries some 60 labels once NFD, the operator and GPU feature discovery have labelled it,
// its managed fields (on a labelled node about as large as the rest of it) and, on a real node, the
// images its kubelet holds: 2,000 of them listed at once are a response body of 12 MB, its copy in
// the protobuf envelope, and the decoded objects, all alive together. So the nodes come as a
// streaming list (a watch that sends the existing nodes and then a bookmark; client-go's informers do
// the same by default since v0.35): one request, each node decoded on its own and handed to keep as
// it arrives, so only what keep returns stays. Against an API server that cannot stream lists, the
// informer falls back to a paged LIST.
//
// keep returns what stays of a node: the node itself, trimmed in place, or a new one.
func ListNodes(ctx context.Context, c kubernetes.Interface, keep func(*corev1.Node) *corev1.Node) ([]*corev1.Node, error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait() // the informer must be gone before we return
	}()

	failed := make(chan error, 1)
	inf, err := nodeInformer(c, keep, failed)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	wg.Go(func() { inf.RunWithContext(ctx) })
	select {
	case <-inf.HasSyncedChecker().Done():
	case err := <-failed:
		if u := unreachable(err); u != nil {
			err = u // one line that names the server, for the CLI's exit code
		}
		return nil, fmt.Errorf("list nodes: %w", err)
	case <-ctx.Done():
		return nil, fmt.Errorf("list nodes: %w", ctx.Err())
	}
	cancel() // the cache is complete: stop the watch before reading it
	return storedNodes(inf.GetStore())
}

// nodeInformer is the informer of ListNodes' one list: it keeps what keep makes of each node, and
// sends the error of a list that failed to failed.
func nodeInformer(c kubernetes.Interface, keep func(*corev1.Node) *corev1.Node, failed chan<- error) (cache.SharedIndexInformer, error) {
	inf := NewInformer("nodes", c, &corev1.Node{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.CoreV1().Nodes().List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.CoreV1().Nodes().Watch(ctx, o)
		})
	err := inf.SetTransform(func(obj any) (any, error) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return obj, nil // a deleted node's tombstone
		}
		return keep(n), nil
	})
	if err != nil {
		return nil, err
	}
	// The informer would retry a failed list forever; a one-shot list reports the first error instead,
	// a refused connection included (NewInformer).
	err = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, r *cache.Reflector, err error) {
		if r.LastSyncResourceVersion() != "" {
			// The list is complete and the watch after it failed (RBAC may allow list without
			// watch): the cache syncs all the same.
			return
		}
		select {
		case failed <- err:
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	return inf, nil
}

// storedNodes are the nodes of a complete informer cache, sorted by name.
func storedNodes(store cache.Store) ([]*corev1.Node, error) {
	objs := store.List()
	out := make([]*corev1.Node, 0, len(objs))
	for _, obj := range objs {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return nil, fmt.Errorf("list nodes: got %T", obj)
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
