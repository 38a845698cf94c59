package kube

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// NewInformer builds an informer of obj's kind (what names it in the informer's logs) from list and
// watch functions. client is the client they call: it tells the reflector whether streaming lists are
// possible (client-go's WatchListClient, on by default since v0.35; real clients can, the fakes
// cannot), so against a real API server the initial list is a watch that sends the existing objects,
// decoded one at a time.
func NewInformer(what string, client any, obj runtime.Object,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
) cache.SharedIndexInformer {
	lw := &cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watchFn}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), obj,
		cache.SharedIndexInformerOptions{ObjectDescription: what})
}
