package dra

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// kubeletPluginStandIn is a STAND-IN for NVIDIA's DRA kubelet plugin on each simulated node, whose
// pod kwok marks Running without running it:
//
//   - a plugin pod (IsGPUKubeletPluginPod) is Running, Ready and not being deleted on a node whose
//     Hardware has GPUs: the node's ResourceSlice of gpu.nvidia.com is Slice(node, hardware);
//   - no such pod: the node has no slice of gpu.nvidia.com. The real plugin does not delete its
//     slices when it stops; the kubelet does, once the plugin has unregistered for a grace period
//     (k8s.io/kubernetes pkg/kubelet/cm/dra). The stand-in deletes them at once.
//
// Slices of other drivers are never touched. A slice that someone changes or deletes is put back.
type kubeletPluginStandIn struct {
	cs     kubernetes.Interface
	hw     map[string]standin.Hardware
	logf   func(string, ...any)
	nodes  corelisters.NodeLister
	pods   cache.Indexer
	slices cache.Indexer
	queue  workqueue.TypedRateLimitingInterface[string]
}

// workers is how many nodes the stand-in reconciles at once; every real node's plugin publishes its
// own slice in parallel.
const workers = 16

// slicesByNode indexes the cached ResourceSlices by spec.nodeName.
const slicesByNode = "node"

// Run runs the DRA kubelet-plugin stand-in until ctx is done and then returns nil. hw maps node names
// to their hardware. It needs list/watch on nodes and pods and list/watch/create/update/delete on
// resourceslices.
func Run(ctx context.Context, cs kubernetes.Interface, hw map[string]standin.Hardware, logf func(string, ...any)) error {
	factory := informers.NewSharedInformerFactory(cs, 0)
	// Only this driver's slices: a node's other drivers are not the stand-in's.
	sliceFactory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorDriver, Driver).String()
	}))
	podInf := factory.Core().V1().Pods().Informer()
	sliceInf := sliceFactory.Resource().V1().ResourceSlices().Informer()
	s := &kubeletPluginStandIn{
		cs:     cs,
		hw:     hw,
		logf:   logf,
		nodes:  factory.Core().V1().Nodes().Lister(),
		pods:   podInf.GetIndexer(),
		slices: sliceInf.GetIndexer(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "dra-kubelet-plugin-stand-in"}),
	}
	if err := standin.IndexPods(podInf); err != nil {
		return fmt.Errorf("dra kubelet-plugin stand-in: %w", err)
	}
	if err := sliceInf.AddIndexers(cache.Indexers{slicesByNode: func(obj any) ([]string, error) {
		if sl, ok := obj.(*resourceapi.ResourceSlice); ok && sl.Spec.NodeName != nil {
			return []string{*sl.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return fmt.Errorf("dra kubelet-plugin stand-in: %w", err)
	}
	nodeReg, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				s.queue.Add(n.Name)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Node)
			n, ok2 := newObj.(*corev1.Node)
			if ok1 && ok2 && o.UID != n.UID {
				s.queue.Add(n.Name)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("dra kubelet-plugin stand-in: watch nodes: %w", err)
	}
	podReg, err := podInf.AddEventHandler(standin.OnAnyChange(func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" && IsGPUKubeletPluginPod(p) {
			s.queue.Add(p.Spec.NodeName)
		}
	}))
	if err != nil {
		return fmt.Errorf("dra kubelet-plugin stand-in: watch pods: %w", err)
	}
	sliceReg, err := sliceInf.AddEventHandler(standin.OnAnyChange(func(obj any) {
		if sl, ok := obj.(*resourceapi.ResourceSlice); ok && sl.Spec.Driver == Driver && sl.Spec.NodeName != nil {
			s.queue.Add(*sl.Spec.NodeName)
		}
	}))
	if err != nil {
		return fmt.Errorf("dra kubelet-plugin stand-in: watch resourceslices: %w", err)
	}
	return standin.RunController(ctx, "dra kubelet-plugin stand-in", []standin.InformerFactory{factory, sliceFactory},
		[]cache.InformerSynced{nodeReg.HasSynced, podReg.HasSynced, sliceReg.HasSynced}, s.queue, workers, s.reconcile, logf)
}

// pluginRunning reports whether a kubelet-plugin pod is Running, Ready and not being deleted on node.
func (s *kubeletPluginStandIn) pluginRunning(node string) (bool, error) {
	onNode, err := standin.IndexedPods(s.pods, standin.PodsByNode, node)
	if err != nil {
		return false, err
	}
	for _, p := range onNode {
		if p.DeletionTimestamp == nil && standin.PodRunningReady(p) && IsGPUKubeletPluginPod(p) {
			return true, nil
		}
	}
	return false, nil
}

// nodeSlices returns the cached slices of this driver on node.
func (s *kubeletPluginStandIn) nodeSlices(node string) ([]*resourceapi.ResourceSlice, error) {
	objs, err := s.slices.ByIndex(slicesByNode, node)
	if err != nil {
		return nil, err
	}
	var out []*resourceapi.ResourceSlice
	for _, o := range objs {
		if sl, ok := o.(*resourceapi.ResourceSlice); ok && sl.Spec.Driver == Driver {
			out = append(out, sl)
		}
	}
	return out, nil
}

func (s *kubeletPluginStandIn) reconcile(ctx context.Context, name string) error {
	have, err := s.nodeSlices(name)
	if err != nil {
		return err
	}
	var want *resourceapi.ResourceSlice
	node, err := s.nodes.Get(name)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	case s.hw[name].GPUs > 0:
		running, err := s.pluginRunning(name)
		if err != nil {
			return err
		}
		if running {
			want = Slice(node, s.hw[name])
		}
	}
	kept := false
	for _, sl := range have {
		if want != nil && !kept && sl.Name == want.Name {
			kept = true
			if sameSlice(sl, want) {
				continue
			}
			upd := sl.DeepCopy()
			upd.OwnerReferences, upd.Spec = want.OwnerReferences, want.Spec
			upd.Spec.Pool.Generation = sl.Spec.Pool.Generation + 1
			if _, err := s.cs.ResourceV1().ResourceSlices().Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update ResourceSlice %s of node %s: %w", sl.Name, name, err)
			}
			s.logf("dra kubelet-plugin stand-in: node %s: ResourceSlice %s put right", name, sl.Name)
			continue
		}
		err := s.cs.ResourceV1().ResourceSlices().Delete(ctx, sl.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &sl.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete ResourceSlice %s of node %s: %w", sl.Name, name, err)
		}
		s.logf("dra kubelet-plugin stand-in: node %s: ResourceSlice %s removed", name, sl.Name)
	}
	if want == nil || kept {
		return nil
	}
	if _, err := s.cs.ResourceV1().ResourceSlices().Create(ctx, want, metav1.CreateOptions{}); err != nil {
		// AlreadyExists: the cache has not seen it yet; its event brings the node back.
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("publish ResourceSlice of node %s: %w", name, err)
	}
	s.logf("dra kubelet-plugin stand-in: node %s publishes %d %s devices", name, len(want.Spec.Devices), Driver)
	return nil
}

// sameSlice compares what the stand-in sets on a slice: its owner, pool name, node and devices.
func sameSlice(have, want *resourceapi.ResourceSlice) bool {
	return equality.Semantic.DeepEqual(have.OwnerReferences, want.OwnerReferences) &&
		have.Spec.Pool.Name == want.Spec.Pool.Name &&
		equality.Semantic.DeepEqual(have.Spec.NodeName, want.Spec.NodeName) &&
		equality.Semantic.DeepEqual(have.Spec.Devices, want.Spec.Devices)
}
