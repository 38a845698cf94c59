package migmanager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

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

// The labels MIG manager reads and writes (NVIDIA/mig-parted deployments/gpu-operator/reconfigure-mig.go
// at v0.15.0; NVIDIA/gpu-operator controllers/nodelabeling_controller.go@v26.7.0, which sets
// mig.config=all-disabled on MIG-capable nodes that have none).
const (
	ConfigLabel = "nvidia.com/mig.config"
	StateLabel  = "nvidia.com/mig.config.state"
	// States of StateLabel.
	StatePending = "pending"
	StateSuccess = "success"
	StateFailed  = "failed"
	// kubectlLabelManager is the field manager of MIG manager's label writes, which it makes with
	// kubectl label --overwrite.
	kubectlLabelManager = "kubectl-label"
	// configMountPath is where the operator's DaemonSet mounts the mig-parted config
	// (NVIDIA/gpu-operator assets/state-mig-manager/0600_daemonset.yaml@v26.7.0).
	configMountPath = "/mig-parted-config"
	// configKey is the mig-parted config's key in that ConfigMap.
	configKey = "config.yaml"
)

// IsMIGManagerPod recognises a pod of NVIDIA's MIG manager: one of the GPU operator's DaemonSet
// nvidia-mig-manager, or one with a container from NVIDIA's k8s-mig-manager image.
func IsMIGManagerPod(p *corev1.Pod) bool {
	for _, ref := range p.OwnerReferences {
		if ref.Kind == "DaemonSet" && ref.Name == "nvidia-mig-manager" {
			return true
		}
	}
	for _, c := range p.Spec.Containers {
		if strings.Contains(c.Image, "k8s-mig-manager") {
			return true
		}
	}
	return false
}

// migManagerStandIn is a STAND-IN for MIG manager as seen through the API: while a MIG-manager pod is
// Running and Ready on a node with GPUs, a value of the node's nvidia.com/mig.config that its GPUs do
// not have yet is applied: nvidia.com/mig.config.state becomes pending, then the GPUs take the layout
// (standin.MIGHardware) and the state becomes success, or the state becomes failed (a config file
// it cannot read, an unknown config, MIG on a GPU without it, a profile the GPU does
// not offer). A failed config is not
// retried until the label changes or the pod is replaced, as MIG manager waits for the next label
// change. The config file is the ConfigMap the pod mounts at /mig-parted-config (the operator's
// default-mig-parted-config, or the ClusterPolicy's migManager.config), read when the config is
// applied; while that ConfigMap does not exist, the fallback Run was given (the operator release's
// own file).
//
// Simplified: MIG manager also pauses the GPU operands (nvidia.com/gpu.deploy.* = paused-for-mig-change)
// and restarts them, and may reboot the node; the stand-in does not, and applies at once.
type migManagerStandIn struct {
	cs         kubernetes.Interface
	hw         map[string]standin.Hardware
	mig        *standin.MIGHardware
	fallback   func() ([]byte, error)
	logf       func(string, ...any)
	nodes      corelisters.NodeLister
	pods       cache.Indexer
	configMaps corelisters.ConfigMapLister
	queue      workqueue.TypedRateLimitingInterface[string]

	// failed remembers, by node, the pod and label value that failed.
	mu     sync.Mutex
	failed map[string]attempt
}

type attempt struct {
	pod    types.UID
	config string
}

// Run runs the MIG-manager stand-in until ctx is done and then returns nil. hw maps node names to
// their hardware, mig is their GPUs' MIG state; fallback returns the mig-parted config file used while the pod's ConfigMap does not
// exist (nil: none, the state stays pending). It needs list/watch on nodes, pods and ConfigMaps and
// patch on nodes.
func Run(ctx context.Context, cs kubernetes.Interface, hw map[string]standin.Hardware, mig *standin.MIGHardware, fallback func() ([]byte, error), logf func(string, ...any)) error {
	factory := informers.NewSharedInformerFactory(cs, 0)
	s := &migManagerStandIn{
		cs:         cs,
		hw:         hw,
		mig:        mig,
		fallback:   fallback,
		logf:       logf,
		nodes:      factory.Core().V1().Nodes().Lister(),
		pods:       factory.Core().V1().Pods().Informer().GetIndexer(),
		configMaps: factory.Core().V1().ConfigMaps().Lister(),
		failed:     map[string]attempt{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "mig-manager-stand-in"}),
	}
	if err := standin.IndexPods(factory.Core().V1().Pods().Informer()); err != nil {
		return fmt.Errorf("mig-manager stand-in: %w", err)
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
			if ok1 && ok2 && (o.Labels[ConfigLabel] != n.Labels[ConfigLabel] || o.Labels[StateLabel] != n.Labels[StateLabel]) {
				s.queue.Add(n.Name)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("mig-manager stand-in: watch nodes: %w", err)
	}
	podReg, err := factory.Core().V1().Pods().Informer().AddEventHandler(standin.OnAnyChange(func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" && IsMIGManagerPod(p) {
			s.queue.Add(p.Spec.NodeName)
		}
	}))
	if err != nil {
		return fmt.Errorf("mig-manager stand-in: watch pods: %w", err)
	}
	cmReg, err := factory.Core().V1().ConfigMaps().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{})
	if err != nil {
		return fmt.Errorf("mig-manager stand-in: watch ConfigMaps: %w", err)
	}
	return standin.RunController(ctx, "mig-manager stand-in", []standin.InformerFactory{factory},
		[]cache.InformerSynced{nodeReg.HasSynced, podReg.HasSynced, cmReg.HasSynced}, s.queue, 4, s.reconcile, logf)
}

// runningPod is a MIG-manager pod Running, Ready and not being deleted on node.
func (s *migManagerStandIn) runningPod(node string) (*corev1.Pod, error) {
	onNode, err := standin.IndexedPods(s.pods, standin.PodsByNode, node)
	if err != nil {
		return nil, err
	}
	for _, p := range onNode {
		if p.DeletionTimestamp == nil && standin.PodRunningReady(p) && IsMIGManagerPod(p) {
			return p, nil
		}
	}
	return nil, nil
}

// configs reads the mig-parted config the pod mounts, else the fallback.
func (s *migManagerStandIn) configs(p *corev1.Pod) (Configs, error) {
	var cmName string
	volumes := map[string]string{}
	for _, v := range p.Spec.Volumes {
		if v.ConfigMap != nil {
			volumes[v.Name] = v.ConfigMap.Name
		}
	}
	for _, c := range p.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if m.MountPath == configMountPath {
				cmName = volumes[m.Name]
			}
		}
	}
	if cmName != "" {
		cm, err := s.configMaps.ConfigMaps(p.Namespace).Get(cmName)
		switch {
		case err == nil && cm.Data[configKey] != "":
			return ParseConfigs([]byte(cm.Data[configKey]))
		case err != nil && !apierrors.IsNotFound(err):
			return Configs{}, err
		}
	}
	if s.fallback == nil {
		return Configs{}, fmt.Errorf("no mig-parted config: ConfigMap %s/%s missing and no fallback", p.Namespace, cmName)
	}
	data, err := s.fallback()
	if err != nil {
		return Configs{}, err
	}
	return ParseConfigs(data)
}

func (s *migManagerStandIn) reconcile(ctx context.Context, name string) error {
	hw := s.hw[name]
	if hw.GPUs <= 0 {
		return nil
	}
	node, err := s.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	want := node.Labels[ConfigLabel]
	if want == "" {
		return nil
	}
	pod, err := s.runningPod(name)
	if err != nil || pod == nil {
		return err
	}
	layout := s.mig.Layout(name)
	state := node.Labels[StateLabel]
	if layout.Config == want && state == StateSuccess {
		return nil
	}
	s.mu.Lock()
	last, tried := s.failed[name]
	s.mu.Unlock()
	if tried && last == (attempt{pod.UID, want}) {
		return nil
	}
	if state != StatePending {
		if err := s.patch(ctx, name, map[string]any{StateLabel: StatePending}); err != nil {
			return err
		}
	}
	cfgs, err := s.configs(pod)
	var applied standin.MIGLayout
	if err == nil {
		applied, err = cfgs.Apply(want, hw, layout)
	}
	var applyErr *ApplyError
	if errors.As(err, &applyErr) {
		s.mu.Lock()
		s.failed[name] = attempt{pod.UID, want}
		s.mu.Unlock()
		s.logf("mig-manager stand-in: node %s: %s failed: %v", name, want, err)
		return s.patch(ctx, name, map[string]any{StateLabel: StateFailed})
	}
	if err != nil {
		return err // no config file to read yet: stays pending; retried
	}
	s.logf("mig-manager stand-in: node %s: applied %s: %s", name, want, applied.Encode())
	s.mig.Set(name, applied)
	return s.patch(ctx, name, map[string]any{StateLabel: StateSuccess})
}

// patch sets labels on a node as MIG manager's kubectl label does.
func (s *migManagerStandIn) patch(ctx context.Context, node string, labels map[string]any) error {
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	if _, err := s.cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, data, metav1.PatchOptions{FieldManager: kubectlLabelManager}); err != nil {
		return fmt.Errorf("mig-manager stand-in: patch node %s: %w", node, err)
	}
	return nil
}
