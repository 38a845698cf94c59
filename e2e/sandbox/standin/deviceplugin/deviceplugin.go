package deviceplugin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
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

// IsGPUFeatureDiscoveryPod recognises a pod of GPU feature discovery: the GPU operator's DaemonSet
// gpu-feature-discovery (NVIDIA/gpu-operator assets/gpu-feature-discovery@v26.7.0), or a container
// that runs the gpu-feature-discovery program (NVIDIA's standalone chart).
func IsGPUFeatureDiscoveryPod(p *corev1.Pod) bool {
	for _, ref := range p.OwnerReferences {
		if ref.Kind == "DaemonSet" && ref.Name == "gpu-feature-discovery" {
			return true
		}
	}
	return standin.PodSpecRuns(&p.Spec, "gpu-feature-discovery")
}

// devicePluginStandIn is a STAND-IN for the kubelet's device manager as seen through the API, since a
// kwok node has no kubelet for NVIDIA's device plugin to register with, and for what GPU feature
// discovery labels:
//
//   - a device-plugin pod (isNVIDIADevicePluginPod) is Running and Ready on a node whose Hardware has
//     GPUs: the plugin has registered, so status.capacity and status.allocatable carry what Advertise
//     says for the plugin's config, MIG strategy and the node's MIG layout: nvidia.com/gpu equal to
//     the number of GPUs without sharing or MIG; a resource the plugin no longer advertises (renamed
//     by a sharing config, a MIG profile gone) drops to 0, as the kubelet keeps a stale resource's key;
//   - no such pod any more: the plugin's endpoint is gone and the kubelet marks its devices unhealthy,
//     so allocatable drops to 0 while capacity stays;
//   - a GPU feature discovery pod is Running and Ready there: the node carries GFD's labels for its
//     GPUs, MIG and sharing (Advertise), written as nfd-master, through which GFD's labels reach a
//     node.
//
// The config: the plugin pod's MIG_STRATEGY, the ConfigMap mounted at /available-configs and the
// config-manager's DEFAULT_CONFIG, as the operator sets them from the ClusterPolicy's mig.strategy
// and devicePlugin.config (NVIDIA/gpu-operator controllers/object_controls.go@v26.7.0,
// handleDevicePluginConfig, applyMIGConfiguration). So a ClusterPolicy change reaches the stand-in
// as the operator's new pod, as it reaches the real plugin. The config-manager sidecar watches only
// the node's nvidia.com/device-plugin.config label (NVIDIA/k8s-device-plugin cmd/config-manager at
// v0.20.0): the stand-in picks a config when the plugin's pod or that label changes and keeps it
// otherwise, so an edited ConfigMap takes effect only after the label changes or the pod is
// restarted, as with the real plugin. A config or MIG layout the real plugin refuses to start
// with counts as no plugin running, and is logged.
//
// Simplified: the kubelet drops capacity too once the endpoint has been gone for its grace period
// (five minutes); the stand-in keeps capacity. The MPS control daemon is not waited for, device
// health is not simulated, GFD's labels are the subset Advertise lists, and a pod is taken as gone
// as soon as it is being deleted. Only NVIDIA's resource keys are ever written (a JSON merge patch on
// the status subresource), so kwok's status heartbeats and this stand-in do not overwrite each other;
// if anything removes or changes the keys, the node update brings the stand-in back to put them right.
type devicePluginStandIn struct {
	real       func(*corev1.Pod) bool
	cs         kubernetes.Interface
	hw         map[string]standin.Hardware
	mig        *standin.MIGHardware
	logf       func(string, ...any)
	nodes      corelisters.NodeLister
	pods       cache.Indexer
	configMaps corelisters.ConfigMapLister
	queue      workqueue.TypedRateLimitingInterface[string]

	// picked is the config each pod's config-manager picked, by node and program.
	mu     sync.Mutex
	picked map[string]pick
}

// pick is a config-manager's choice: for which pod and label value, and what it chose.
type pick struct {
	pod   types.UID
	label string
	key   string
	cfg   PluginConfig
	err   error
}

// devicePluginWorkers is how many nodes the stand-in updates at once. Each real node's kubelet
// writes its own status, all of them in parallel; one worker would make 2,000 nodes queue behind
// each other.
const devicePluginWorkers = 16

// Labels and annotations the stand-in acts on.
const (
	// ConfigLabel picks the node's device-plugin config (the config-manager's NODE_LABEL).
	ConfigLabel = "nvidia.com/device-plugin.config"
	// nfdMasterFieldManager is the field manager GFD's labels are recorded under: GFD hands them to
	// nfd-master, which labels the node.
	nfdMasterFieldManager = "nfd-master"
)

// Run runs the device-plugin stand-in until ctx is done and then returns nil. hw maps node names to
// their hardware, mig is their GPUs' MIG state. It needs list/watch on nodes, pods and ConfigMaps, and patch on nodes and nodes/status.
func Run(ctx context.Context, cs kubernetes.Interface, hw map[string]standin.Hardware, mig *standin.MIGHardware, logf func(string, ...any)) error {
	return RunExcept(ctx, cs, hw, mig, nil, logf)
}

// RunExcept is Run leaving alone the nodes where a pod real reports true for runs: NVIDIA's own
// device plugin or GPU Feature Discovery runs for it (package sandbox/gpunode), and the kubelet
// device-manager stand-in there (package sandbox/kubeletdm) writes what NVIDIA's plugin registers.
// A plugin pod real runs leaves the node's resources to them; a GFD pod real runs, its labels.
func RunExcept(ctx context.Context, cs kubernetes.Interface, hw map[string]standin.Hardware, mig *standin.MIGHardware, real func(*corev1.Pod) bool, logf func(string, ...any)) error {
	if real == nil {
		real = func(*corev1.Pod) bool { return false }
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	s := &devicePluginStandIn{
		real:       real,
		cs:         cs,
		hw:         hw,
		mig:        mig,
		logf:       logf,
		nodes:      factory.Core().V1().Nodes().Lister(),
		pods:       factory.Core().V1().Pods().Informer().GetIndexer(),
		configMaps: factory.Core().V1().ConfigMaps().Lister(),
		picked:     map[string]pick{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "device-plugin-stand-in"}),
	}
	if err := standin.IndexPods(factory.Core().V1().Pods().Informer()); err != nil {
		return fmt.Errorf("device-plugin stand-in: %w", err)
	}
	mig.Watch(s.queue.Add) // NVML shows the new MIG devices
	nodeReg, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				s.queue.Add(n.Name)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Node)
			n, ok2 := newObj.(*corev1.Node)
			if ok1 && ok2 && (!sameNVIDIAResources(o, n) || !maps.Equal(o.Labels, n.Labels)) {
				s.queue.Add(n.Name)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("device-plugin stand-in: watch nodes: %w", err)
	}
	podReg, err := factory.Core().V1().Pods().Informer().AddEventHandler(standin.OnAnyChange(func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" && (IsNVIDIADevicePluginPod(p) || IsGPUFeatureDiscoveryPod(p)) {
			s.queue.Add(p.Spec.NodeName)
		}
	}))
	if err != nil {
		return fmt.Errorf("device-plugin stand-in: watch pods: %w", err)
	}
	cmReg, err := factory.Core().V1().ConfigMaps().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{})
	if err != nil {
		return fmt.Errorf("device-plugin stand-in: watch ConfigMaps: %w", err)
	}
	return standin.RunController(ctx, "device-plugin stand-in", []standin.InformerFactory{factory},
		[]cache.InformerSynced{nodeReg.HasSynced, podReg.HasSynced, cmReg.HasSynced}, s.queue, devicePluginWorkers, s.reconcile, logf)
}

// isNVIDIAResource reports whether a node resource is one NVIDIA's device plugin registers.
func isNVIDIAResource(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), "nvidia.com/")
}

// sameNVIDIAResources compares the NVIDIA entries of two versions of a node's status.
func sameNVIDIAResources(a, b *corev1.Node) bool {
	eq := func(x, y corev1.ResourceList) bool {
		for _, l := range []corev1.ResourceList{x, y} {
			for name := range l {
				if !isNVIDIAResource(name) {
					continue
				}
				qx, okx := x[name]
				qy, oky := y[name]
				if okx != oky || qx.Cmp(qy) != 0 {
					return false
				}
			}
		}
		return true
	}
	return eq(a.Status.Capacity, b.Status.Capacity) && eq(a.Status.Allocatable, b.Status.Allocatable)
}

// runningPod returns a pod on node that is Running, Ready, not being deleted and recognised by is.
func (s *devicePluginStandIn) runningPod(node string, is func(*corev1.Pod) bool) (*corev1.Pod, error) {
	onNode, err := standin.IndexedPods(s.pods, standin.PodsByNode, node)
	if err != nil {
		return nil, err
	}
	for _, p := range onNode {
		if p.DeletionTimestamp == nil && standin.PodRunningReady(p) && is(p) {
			return p, nil
		}
	}
	return nil, nil
}

// podSettings is what the operator gives a device-plugin or GFD pod: the MIG strategy (MIG_STRATEGY
// on any container), the ConfigMap of configs (the volume mounted at /available-configs) and the
// default config (DEFAULT_CONFIG of the config-manager).
func podSettings(p *corev1.Pod) (migStrategy, configMap, def string) {
	volumes := map[string]string{}
	for _, v := range p.Spec.Volumes {
		if v.ConfigMap != nil {
			volumes[v.Name] = v.ConfigMap.Name
		}
	}
	for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
		for _, e := range c.Env {
			switch e.Name {
			case "MIG_STRATEGY":
				migStrategy = cmp.Or(migStrategy, e.Value)
			case "DEFAULT_CONFIG":
				def = cmp.Or(def, e.Value)
			}
		}
		for _, m := range c.VolumeMounts {
			if m.MountPath == "/available-configs" && volumes[m.Name] != "" {
				configMap = volumes[m.Name]
			}
		}
	}
	return migStrategy, configMap, def
}

// config is the config p's config-manager picked for node: picked again only when the pod or the
// node's label changed since. A ConfigMap the pod mounts that does not exist yet is an error (the
// kubelet would not start the pod); a config the plugin refuses is returned as err of the pick.
func (s *devicePluginStandIn) config(node *corev1.Node, p *corev1.Pod, program string) (migStrategy string, cfg PluginConfig, err error) {
	migStrategy, cmName, def := podSettings(p)
	if cmName == "" {
		return migStrategy, PluginConfig{Version: "v1"}, nil
	}
	label := node.Labels[ConfigLabel]
	key := node.Name + "/" + program
	s.mu.Lock()
	old, ok := s.picked[key]
	s.mu.Unlock()
	if !ok || old.pod != p.UID || old.label != label {
		cm, err := s.configMaps.ConfigMaps(p.Namespace).Get(cmName)
		if err != nil {
			return "", PluginConfig{}, fmt.Errorf("%s on %s: ConfigMap %s/%s: %w", program, node.Name, p.Namespace, cmName, err)
		}
		name, c, err := SelectConfig(cm.Data, label, def)
		if errors.Is(err, errNoConfig) {
			err = nil
		}
		old = pick{pod: p.UID, label: label, key: name, cfg: c, err: err}
		s.mu.Lock()
		s.picked[key] = old
		s.mu.Unlock()
		if err == nil {
			s.logf("device-plugin stand-in: %s on %s picked config %q of %s/%s", program, node.Name, name, p.Namespace, cmName)
		}
	}
	if old.err != nil {
		return "", PluginConfig{}, old.err
	}
	// The command line (MIG_STRATEGY) wins over the config file's flags.
	if migStrategy == "" && old.cfg.Flags.MigStrategy != nil {
		migStrategy = *old.cfg.Flags.MigStrategy
	}
	return migStrategy, old.cfg, nil
}

// advertisement is what the program in pod p (the plugin or GFD) shows on node; a config or layout it
// refuses is logged and returns ok false, as the program would exit.
func (s *devicePluginStandIn) advertisement(node *corev1.Node, p *corev1.Pod, program string) (Advertisement, bool, error) {
	hw := s.hw[node.Name]
	migStrategy, cfg, err := s.config(node, p, program)
	var cfgErr *ConfigError
	if errors.As(err, &cfgErr) {
		s.logf("device-plugin stand-in: %s on %s would exit: %v", program, node.Name, err)
		return Advertisement{}, false, nil
	}
	if err != nil {
		return Advertisement{}, false, err
	}
	ad, err := Advertise(hw, cfg, migStrategy, s.mig.Layout(node.Name))
	if err != nil {
		s.logf("device-plugin stand-in: %s on %s would exit: %v", program, node.Name, err)
		return Advertisement{}, false, nil
	}
	return ad, true, nil
}

func (s *devicePluginStandIn) reconcile(ctx context.Context, name string) error {
	if s.hw[name].GPUs <= 0 {
		return nil // a plugin without devices registers nothing
	}
	node, err := s.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := s.reconcileLabels(ctx, node); err != nil {
		return err
	}
	if real, err := s.runningPod(name, func(p *corev1.Pod) bool { return IsNVIDIADevicePluginPod(p) && s.real(p) }); err != nil || real != nil {
		return err // the kubelet device-manager stand-in writes what NVIDIA's plugin registers
	}
	plugin, err := s.runningPod(name, IsNVIDIADevicePluginPod)
	if err != nil {
		return err
	}
	var ad Advertisement
	running := plugin != nil
	if running {
		if ad, running, err = s.advertisement(node, plugin, "device plugin"); err != nil {
			return err
		}
	}
	want := resourcePatch(node, ad, running)
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
		return fmt.Errorf("advertise NVIDIA resources on node %s: %w", name, err)
	}
	if running {
		s.logf("device-plugin stand-in: node %s advertises %s", name, ad)
	} else {
		s.logf("device-plugin stand-in: node %s: device plugin gone, its resources allocatable 0", name)
	}
	return nil
}

// resourcePatch is what of node's status must change for the plugin's advertisement (running) or
// for its absence: the NVIDIA resources it advertises, at their counts; what it does not advertise
// (any more) unhealthy, allocatable 0, and a resource the running plugin dropped capacity 0 too.
func resourcePatch(node *corev1.Node, ad Advertisement, running bool) map[string]map[string]any {
	want := map[string]map[string]any{}
	set := func(field string, res corev1.ResourceName, n int64) {
		if want[field] == nil {
			want[field] = map[string]any{}
		}
		want[field][string(res)] = strconv.FormatInt(n, 10)
	}
	has := func(l corev1.ResourceList, res corev1.ResourceName, n int64) bool {
		q, ok := l[res]
		return ok && q.Value() == n
	}
	if running {
		for res, n := range ad.Resources {
			if !has(node.Status.Capacity, res, n) {
				set("capacity", res, n)
			}
			if !has(node.Status.Allocatable, res, n) {
				set("allocatable", res, n)
			}
		}
	}
	// What the plugin does not advertise (any more): unhealthy, allocatable 0; a resource the running
	// plugin dropped has capacity 0 too.
	for res := range node.Status.Capacity {
		if _, ok := ad.Resources[res]; ok || !isNVIDIAResource(res) {
			continue
		}
		if !has(node.Status.Allocatable, res, 0) {
			set("allocatable", res, 0)
		}
		if running && !has(node.Status.Capacity, res, 0) {
			set("capacity", res, 0)
		}
	}
	return want
}

// reconcileLabels writes GFD's labels while a GFD pod runs on node. Labels GFD no longer sets (a MIG
// profile's count) are removed; with GFD gone its labels stay, as nfd-master keeps them until pruned.
func (s *devicePluginStandIn) reconcileLabels(ctx context.Context, node *corev1.Node) error {
	gfd, err := s.runningPod(node.Name, IsGPUFeatureDiscoveryPod)
	if err != nil || gfd == nil || s.real(gfd) {
		return err // NVIDIA's GFD, through nfd-master, labels the node
	}
	ad, ok, err := s.advertisement(node, gfd, "gpu-feature-discovery")
	if err != nil || !ok {
		return err
	}
	patch := map[string]any{}
	for k, v := range ad.Labels {
		if node.Labels[k] != v {
			patch[k] = v
		}
	}
	for k := range node.Labels {
		if _, ok := ad.Labels[k]; !ok && strings.HasPrefix(k, migResourcePrefix) {
			patch[k] = nil
		}
	}
	if len(patch) == 0 {
		return nil
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": patch}})
	if err != nil {
		return err
	}
	if _, err := s.cs.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, data, metav1.PatchOptions{FieldManager: nfdMasterFieldManager}); err != nil {
		return fmt.Errorf("label node %s as GPU feature discovery: %w", node.Name, err)
	}
	return nil
}

// sortedNames are a resource list's names, sorted.
func sortedNames(m map[corev1.ResourceName]int64) []corev1.ResourceName {
	return slices.Sorted(maps.Keys(m))
}
