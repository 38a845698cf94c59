package kube

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// NewInformer builds an informer of obj's kind (what names it in the informer's logs) from list and
// watch functions. client is the client they call: it tells the reflector whether streaming lists are
// possible (client-go's WatchListClient, on by default since v0.35; real clients can, the fakes
// cannot), so against a real API server the initial list is a watch that sends the existing objects,
// decoded one at a time.
//
// A refused connection reaches the reflector as an *UnreachableError. Seen as itself, client-go's
// reflector (v0.37 tools/cache/reflector.go, watchList) would retry it forever, sleeping between tries
// in a wait that ignores the context, so neither a one-shot list (ListNodes) could report it nor
// Ctrl-C end a wait promptly. As an error of its own, the informer's watch error handler sees it and
// the reflector's next try waits in its cancellable backoff.
func NewInformer(what string, client any, obj runtime.Object,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			obj, err := list(ctx, o)
			return obj, refusedAsUnreachable(err)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := watchFn(ctx, o)
			return w, refusedAsUnreachable(err)
		},
	}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), obj,
		cache.SharedIndexInformerOptions{ObjectDescription: what})
}

// refusedAsUnreachable turns a refused connection into an *UnreachableError, which hides the errno
// from the reflector; other errors stay as they are.
func refusedAsUnreachable(err error) error {
	if err != nil && utilnet.IsConnectionRefused(err) {
		if u := unreachable(err); u != nil {
			return u
		}
	}
	return err
}
