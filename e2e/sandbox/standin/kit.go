package standin

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// runsProgram reports whether a container runs the named program: one of its command or args entries
// starts with it (possibly by path, e.g. /usr/bin/nfd-worker). Flags such as
// -config=/etc/…/nfd-worker.conf do not count.
func RunsProgram(c *corev1.Container, program string) bool {
	for _, s := range slices.Concat(c.Command, c.Args) {
		if f := strings.Fields(s); len(f) > 0 && path.Base(f[0]) == program {
			return true
		}
	}
	return false
}

func PodSpecRuns(spec *corev1.PodSpec, program string) bool {
	for i := range spec.Containers {
		if RunsProgram(&spec.Containers[i], program) {
			return true
		}
	}
	return false
}

// podRunningReady is what the stand-ins take as "the program is up": phase Running and condition Ready.
func PodRunningReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// onAnyChange calls fn with the object of every add and delete and with the old and the new object of
// every update (so that a pod that stops matching is seen too); tombstones are unwrapped.
func OnAnyChange(fn func(obj any)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    fn,
		UpdateFunc: func(oldObj, newObj any) { fn(oldObj); fn(newObj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			fn(obj)
		},
	}
}

// informerFactory is the part of an informer factory runController needs; the typed and the dynamic
// factories both have it.
type InformerFactory interface {
	Start(stopCh <-chan struct{})
	Shutdown()
}

// runController starts the factories, waits until every event handler has seen its informer's initial
// list (synced), then reconciles keys from queue one at a time until ctx is done. A failed reconcile is
// retried with the queue's back-off. It returns nil when ctx ends and an error only if the caches could
// not sync.
func RunController[K comparable](ctx context.Context, name string, factories []InformerFactory, synced []cache.InformerSynced,
	queue workqueue.TypedRateLimitingInterface[K], workers int, reconcile func(context.Context, K) error, logf func(string, ...any)) error {
	defer queue.ShutDown()
	for _, f := range factories {
		f.Start(ctx.Done())
		defer f.Shutdown()
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("%s: caches did not sync", name)
	}
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	// The queue hands a key to one worker at a time, so a reconcile of one key never races another of
	// the same key.
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for {
				key, shutdown := queue.Get()
				if shutdown {
					return
				}
				err := reconcile(ctx, key)
				switch {
				case err == nil:
					queue.Forget(key)
				case ctx.Err() != nil:
				default:
					logf("%s: %v (will retry)", name, err)
					queue.AddRateLimited(key)
				}
				queue.Done(key)
			}
		})
	}
	wg.Wait()
	return nil
}

// Indexes of the stand-ins' pod caches. Looking a node's pods up by scanning every pod costs
// nodes × pods per pass: at 2,000 GPU nodes that is 2,000 × 16,000 operand pods.
const (
	// podsByNode indexes pods by spec.nodeName.
	PodsByNode = "node"
	// podsRunningNFDMaster indexes, under the value "nfd-master", the pods that run nfd-master.
	PodsRunningNFDMaster = "nfd-master"
)

func IndexPods(inf cache.SharedIndexInformer) error {
	return inf.AddIndexers(cache.Indexers{
		PodsByNode: func(obj any) ([]string, error) {
			if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
				return []string{p.Spec.NodeName}, nil
			}
			return nil, nil
		},
		PodsRunningNFDMaster: func(obj any) ([]string, error) {
			if p, ok := obj.(*corev1.Pod); ok && PodSpecRuns(&p.Spec, "nfd-master") {
				return []string{"nfd-master"}, nil
			}
			return nil, nil
		},
	})
}

// indexedPods returns the cached pods under one index value. Callers must not modify them.
func IndexedPods(idx cache.Indexer, index, value string) ([]*corev1.Pod, error) {
	objs, err := idx.ByIndex(index, value)
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// NFDWorkerConfSuffix ends the ConfigMap key nfd-worker's config file is projected from (nfd-worker.conf
// in NFD's Helm chart's <fullname>-worker-conf and in the OpenShift NFD operator's nfd-worker): the NFD
// worker stand-in reads it, the OLM stand-in's NFD operator writes it.
const NFDWorkerConfSuffix = "nfd-worker.conf"
