package kubeletdm

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// podState is what the Manager allocated to one pod.
type podState struct {
	key         string // namespace/name
	allocations []Allocation
	annotated   bool
}

// Allocations are the plugins' answers for the pod's containers, in the order allocated (init
// containers first); nil if the Manager allocated nothing to it (yet), or it has ended.
func (m *Manager) Allocations(pod types.UID) []Allocation {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.pods[pod]; s != nil {
		return append([]Allocation(nil), s.allocations...)
	}
	return nil
}

// watchPods allocates devices to the node's pods and frees them, until ctx is done. It watches the
// pods whose spec.nodeName is the node, as the kubelet's API server source does
// (pkg/kubelet/config/apiserver.go@v1.37.2), and looks again at each pod whenever a plugin reports its
// devices, so that a pod that could not have its devices gets them once they are there.
func (m *Manager) watchPods(ctx context.Context) {
	factory := informers.NewSharedInformerFactoryWithOptions(m.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", m.Node).String()
	}))
	defer factory.Shutdown()
	inf := factory.Core().V1().Pods().Informer()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != m.Node {
			return // a fake clientset's watch does not select by field
		}
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }, DeleteFunc: enqueue,
	}); err != nil {
		m.logf("watch pods: %v", err)
		return
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				queue.ShutDown()
				return
			case <-m.retryPods:
				for _, key := range inf.GetIndexer().ListKeys() {
					queue.Add(key)
				}
			}
		}
	}()
	for m.processPod(ctx, queue, inf.GetIndexer()) {
	}
}

func (m *Manager) processPod(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], pods cache.Indexer) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	if err := m.syncPod(ctx, key, pods); err != nil {
		if ctx.Err() == nil {
			m.logf("pod %s: %v (retrying)", key, err)
		}
		queue.AddRateLimited(key)
		return true
	}
	queue.Forget(key)
	return true
}

// syncPod frees the devices of a pod that has ended or gone, as the kubelet's UpdateAllocatedDevices
// does for pods no longer active (manager.go@v1.37.2), and allocates a running one's. Its error is
// one to retry soon (writing the pod); a failed allocation is written on the pod and tried again when
// a plugin next reports.
func (m *Manager) syncPod(ctx context.Context, key string, pods cache.Indexer) error {
	obj, exists, err := pods.GetByKey(key)
	if err != nil {
		return err
	}
	pod, _ := obj.(*corev1.Pod)
	if !exists || pod == nil || pod.Spec.NodeName != m.Node {
		m.release(key, "")
		return nil
	}
	m.release(key, pod.UID) // a pod of the same name before this one
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		m.release(key, "")
		return nil
	}
	m.mu.Lock()
	s := m.pods[pod.UID]
	m.mu.Unlock()
	if s == nil {
		allocs, err := m.allocatePod(ctx, pod)
		if err != nil {
			m.logf("pod %s: %v", key, err)
			return m.annotateError(ctx, pod, err)
		}
		if len(allocs) == 0 {
			return nil
		}
		s = &podState{key: key, allocations: allocs}
		m.mu.Lock()
		m.pods[pod.UID] = s
		m.mu.Unlock()
		m.logAllocations(key, allocs)
	}
	return m.annotate(ctx, pod, s)
}

// release frees the devices of the pods recorded under key, except the one with UID keep.
func (m *Manager) release(key string, keep types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid, s := range m.pods {
		if s.key != key || uid == keep {
			continue
		}
		for _, a := range s.allocations {
			if r := m.resources[a.Resource]; r != nil {
				r.allocated.Delete(a.DeviceIDs...)
			}
		}
		delete(m.pods, uid)
		m.logf("pod %s (%s) ended: its devices are free", key, uid)
		signal(m.retryPods) // a pod waiting for devices may have them now
	}
}

func (m *Manager) logAllocations(key string, allocs []Allocation) {
	for _, a := range allocs {
		m.logf("pod %s container %s: %s %v, %d envs", key, a.Container, a.Resource, a.DeviceIDs, len(a.Response.GetEnvs()))
	}
}
