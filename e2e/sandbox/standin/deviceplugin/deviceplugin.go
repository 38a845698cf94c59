package deviceplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// nvidiaGPUResource is the extended resource NVIDIA's device plugin (and GKE's) registers with the
// kubelet (NVIDIA/gpu-operator cmd/nvidia-validator/main.go@v26.7.0: the validator's plugin-validation waits for it in status.capacity).
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// isNVIDIADevicePluginPod recognises a pod that registers nvidia.com/gpu with the kubelet: one from the
// GPU operator's DaemonSet nvidia-device-plugin-daemonset (NVIDIA/gpu-operator controllers/state_manager.go@v26.7.0), or one with a container from
// GKE's nvidia-gpu-device-plugin image, or one with a container from NVIDIA's k8s-device-plugin image
// that runs the plugin itself. Since device plugin v0.15 the same image also carries
// gpu-feature-discovery, the MPS control daemon and config-manager (NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0:
// GFD uses the device plugin's image); containers running those do not register anything.
// kubeletFieldManager is the field manager of a kubelet's node status updates.
const kubeletFieldManager = "kubelet"

func IsNVIDIADevicePluginPod(p *corev1.Pod) bool {
	for _, ref := range p.OwnerReferences {
		if ref.Kind == "DaemonSet" && ref.Name == "nvidia-device-plugin-daemonset" {
			return true
		}
	}
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		if strings.Contains(c.Image, "nvidia-gpu-device-plugin") {
			return true
		}
		if strings.Contains(c.Image, "k8s-device-plugin") && !runsOtherToolOfPluginImage(c) {
			return true
		}
	}
	return false
}

func runsOtherToolOfPluginImage(c *corev1.Container) bool {
	for _, s := range slices.Concat([]string{c.Name}, c.Command, c.Args) {
		for _, tool := range []string{"gpu-feature-discovery", "mps-control-daemon", "config-manager"} {
			if strings.Contains(s, tool) {
				return true
			}
		}
	}
	return false
}

// devicePluginStandIn is a STAND-IN for the kubelet's device manager as seen through the API, since a
// kwok node has no kubelet for NVIDIA's device plugin to register with:
//
//   - a device-plugin pod (isNVIDIADevicePluginPod) is Running and Ready on a node whose Hardware has
//     GPUs: the plugin has registered, so status.capacity and status.allocatable carry nvidia.com/gpu
//     equal to the number of GPUs;
//   - no such pod any more: the plugin's endpoint is gone and the kubelet marks its devices unhealthy,
//     so allocatable drops to 0 while capacity stays.
//
// Simplified: the kubelet drops capacity too once the endpoint has been gone for its grace period
// (five minutes); the stand-in keeps capacity. MIG resources (nvidia.com/mig-*), time-slicing replicas
// and device health are not simulated, and a pod is taken as gone as soon as it is being deleted.
// Only the nvidia.com/gpu keys are ever written (a JSON merge patch on the status subresource), so
// kwok's status heartbeats and this stand-in do not overwrite each other; if anything removes or
// changes the keys, the node update brings the stand-in back to put them right.
type devicePluginStandIn struct {
	cs    kubernetes.Interface
	hw    map[string]standin.Hardware
	logf  func(string, ...any)
	nodes corelisters.NodeLister
	pods  cache.Indexer
	queue workqueue.TypedRateLimitingInterface[string]
}

// devicePluginWorkers is how many nodes the stand-in updates at once. Each real node's kubelet
// writes its own status, all of them in parallel; one worker would make 2,000 nodes queue behind
// each other.
const devicePluginWorkers = 16

// runDevicePluginStandIn runs the device-plugin stand-in until ctx is done and then returns nil. hw maps
// node names to their hardware. It needs list/watch on nodes and pods and patch on nodes/status.
func Run(ctx context.Context, cs kubernetes.Interface, hw map[string]standin.Hardware, logf func(string, ...any)) error {
	factory := informers.NewSharedInformerFactory(cs, 0)
	s := &devicePluginStandIn{
		cs:    cs,
		hw:    hw,
		logf:  logf,
		nodes: factory.Core().V1().Nodes().Lister(),
		pods:  factory.Core().V1().Pods().Informer().GetIndexer(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "device-plugin-stand-in"}),
	}
	if err := standin.IndexPods(factory.Core().V1().Pods().Informer()); err != nil {
		return fmt.Errorf("device-plugin stand-in: %w", err)
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
			if ok1 && ok2 && !sameGPUResources(o, n) {
				s.queue.Add(n.Name)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("device-plugin stand-in: watch nodes: %w", err)
	}
	podReg, err := factory.Core().V1().Pods().Informer().AddEventHandler(standin.OnAnyChange(func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" && IsNVIDIADevicePluginPod(p) {
			s.queue.Add(p.Spec.NodeName)
		}
	}))
	if err != nil {
		return fmt.Errorf("device-plugin stand-in: watch pods: %w", err)
	}
	return standin.RunController(ctx, "device-plugin stand-in", []standin.InformerFactory{factory},
		[]cache.InformerSynced{nodeReg.HasSynced, podReg.HasSynced}, s.queue, devicePluginWorkers, s.reconcile, logf)
}

// sameGPUResources compares the nvidia.com/gpu entries of two versions of a node's status.
func sameGPUResources(a, b *corev1.Node) bool {
	eq := func(x, y corev1.ResourceList) bool {
		qx, okx := x[GPUResource]
		qy, oky := y[GPUResource]
		return okx == oky && qx.Cmp(qy) == 0
	}
	return eq(a.Status.Capacity, b.Status.Capacity) && eq(a.Status.Allocatable, b.Status.Allocatable)
}

// pluginRunning reports whether a device-plugin pod is Running, Ready and not being deleted on node.
func (s *devicePluginStandIn) pluginRunning(node string) (bool, error) {
	onNode, err := standin.IndexedPods(s.pods, standin.PodsByNode, node)
	if err != nil {
		return false, err
	}
	for _, p := range onNode {
		if p.DeletionTimestamp == nil && standin.PodRunningReady(p) && IsNVIDIADevicePluginPod(p) {
			return true, nil
		}
	}
	return false, nil
}

func (s *devicePluginStandIn) reconcile(ctx context.Context, name string) error {
	gpus := s.hw[name].GPUs
	if gpus <= 0 {
		return nil // a plugin without devices registers nothing
	}
	node, err := s.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	running, err := s.pluginRunning(name)
	if err != nil {
		return err
	}
	want := map[string]any{}
	capQ, hasCap := node.Status.Capacity[GPUResource]
	allocQ, hasAlloc := node.Status.Allocatable[GPUResource]
	switch {
	case running:
		if !hasCap || capQ.Value() != int64(gpus) {
			want["capacity"] = map[string]any{string(GPUResource): strconv.Itoa(gpus)}
		}
		if !hasAlloc || allocQ.Value() != int64(gpus) {
			want["allocatable"] = map[string]any{string(GPUResource): strconv.Itoa(gpus)}
		}
	case hasCap || hasAlloc:
		// The plugin registered once and is gone: its devices are unhealthy now.
		if !hasAlloc || !allocQ.IsZero() {
			want["allocatable"] = map[string]any{string(GPUResource): "0"}
		}
	}
	if len(want) == 0 {
		return nil
	}
	data, err := json.Marshal(map[string]any{"status": want})
	if err != nil {
		return err
	}
	// The kubelet advertises a device plugin's resources in the node's status, under its own field
	// manager (https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/).
	opts := metav1.PatchOptions{FieldManager: kubeletFieldManager}
	if _, err := s.cs.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, data, opts, "status"); err != nil {
		return fmt.Errorf("advertise %s on node %s: %w", GPUResource, name, err)
	}
	if running {
		s.logf("device-plugin stand-in: node %s advertises %s: %d", name, GPUResource, gpus)
	} else {
		s.logf("device-plugin stand-in: node %s: device plugin gone, %s allocatable 0", name, GPUResource)
	}
	return nil
}
