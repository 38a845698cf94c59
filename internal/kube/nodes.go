package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"
)

// nodePageSize is how many nodes one page of EachNode lists.
const nodePageSize = 500

// EachNode calls fn with every node, listing them in pages of 500 (client-go's pager, which falls back
// to one full list if the server lets the continuation expire). A node carries some 60 labels once
// NFD and the operator have labelled it, and its status: a 2,000-node list decoded at once is tens of
// megabytes, while the callers keep a few fields of each. fn must not keep the node it is given,
// only what it copies out of it.
func EachNode(ctx context.Context, c kubernetes.Interface, fn func(*corev1.Node) error) error {
	p := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
		return c.CoreV1().Nodes().List(ctx, opts)
	}))
	p.PageSize = nodePageSize
	// One page ahead: the default buffers ten, which would hold the whole list again.
	p.PageBufferSize = 1
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return fmt.Errorf("list nodes: got %T", obj)
		}
		return fn(n)
	})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	return nil
}
