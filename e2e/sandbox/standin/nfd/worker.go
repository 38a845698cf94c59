package nfd

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// Facts about Node Feature Discovery v0.19 (kubernetes-sigs/node-feature-discovery
// api/nfd/v1alpha1 and pkg/nfd-master at v0.19.0) that the stand-in reproduces.
const (
	// nfdFeatureLabelNs is the default feature-label namespace; labels in it are listed in
	// nfdFeatureLabelsAnnotation without the prefix.
	FeatureLabelNs = "feature.node.kubernetes.io"
	// nfdFeatureLabelsAnnotation is where nfd-master records, sorted and comma-separated, the feature
	// labels it manages on a node, so it can remove exactly those later.
	FeatureLabelsAnnotation = "nfd.node.kubernetes.io/feature-labels"
	// nfdMasterFieldManager is the field manager nfd-master's node updates are recorded under.
	nfdMasterFieldManager = "nfd-master"
)

// nfdDefaultDeviceClassWhitelist and nfdDefaultDeviceLabelFields are NFD's upstream defaults for the pci
// source (kubernetes-sigs/node-feature-discovery@v0.19.0); the GPU operator's NFD subchart overrides both.
func nfdDefaultDeviceClassWhitelist() []string { return []string{"03", "0b40", "12"} }
func nfdDefaultDeviceLabelFields() []string    { return []string{"class", "vendor"} }

// nfdPCIConfig is the part of nfd-worker.conf the stand-in honours: which PCI classes are labelled and
// which fields name the label.
type nfdPCIConfig struct {
	DeviceClassWhitelist []string `json:"deviceClassWhitelist,omitempty"`
	DeviceLabelFields    []string `json:"deviceLabelFields,omitempty"`
}

// parseNFDWorkerConfig reads sources.pci from an nfd-worker.conf document; absent or empty settings take
// NFD's defaults, as nfd-worker does.
func parseNFDWorkerConfig(data string) (nfdPCIConfig, error) {
	var doc struct {
		Sources struct {
			PCI nfdPCIConfig `json:"pci"`
		} `json:"sources"`
	}
	var err error
	if strings.TrimSpace(data) != "" {
		if err = yaml.Unmarshal([]byte(data), &doc); err != nil {
			err = fmt.Errorf("parse nfd-worker.conf: %w", err)
		}
	}
	cfg := doc.Sources.PCI
	if len(cfg.DeviceClassWhitelist) == 0 {
		cfg.DeviceClassWhitelist = nfdDefaultDeviceClassWhitelist()
	}
	if len(cfg.DeviceLabelFields) == 0 {
		cfg.DeviceLabelFields = nfdDefaultDeviceLabelFields()
	}
	return cfg, err
}

// classWhitelisted reports whether nfd-worker labels a device of PCI class class: a whitelist entry
// matches as a prefix of the four-hex-digit class, so "03" covers 0300 and 0302.
func (c nfdPCIConfig) classWhitelisted(class string) bool {
	for _, w := range c.DeviceClassWhitelist {
		if w != "" && strings.HasPrefix(class, w) {
			return true
		}
	}
	return false
}

// nfdOwnership is what the stand-in has written on one node.
type nfdOwnership struct {
	// labels are the keys the stand-in added or changed. A label that was already there with the value
	// NFD would give it (a scenario's pre-set NFD labels) is never claimed, so it is never removed.
	labels map[string]bool
	// annotated says the stand-in wrote nfdFeatureLabelsAnnotation; prior/hadPrior is what was there
	// before, restored on uninstall.
	annotated bool
	prior     string
	hadPrior  bool
}

// nfdStandIn is a STAND-IN for Node Feature Discovery's worker and master (NFD v0.19): a simulated node
// has no /sys or /proc to inspect, so instead of nfd-worker publishing a NodeFeature and nfd-master
// turning it into labels, this controller labels a node from its Hardware when NFD, as seen through
// the API, is installed and running there:
//
//   - a Running and Ready nfd-master pod exists anywhere, and a Running nfd-worker pod is on the node:
//     the node gets the labels nfdLabels computes, named per the worker's deviceLabelFields and limited
//     to its deviceClassWhitelist (read from the ConfigMap mounted into the worker pod, as nfd-worker
//     reads its config file), plus nfd-master's feature-labels annotation;
//   - NFD is installed but a worker or the master is not running (a restart, a rollout): labels stay,
//     as they do with real NFD, whose NodeFeature objects are owned by the worker DaemonSet as well as
//     the pod (NFD v0.19 -owner-refs default pod,ds);
//   - no nfd-worker DaemonSet exists any more (NFD uninstalled, which with the Helm chart runs the
//     prune job): the labels the stand-in set are removed — only those, never labels someone else put
//     there, such as a scenario's pre-set NFD labels. (A pre-set label the stand-in had to change to
//     NFD's value counts as set by it; its old value is not restored.)
//
// The worker's config is read when its pod is first seen running and kept for that pod: NFD v0.17
// dropped run-time reconfiguration, so a config edit takes effect when the worker pods restart (NFD
// docs, usage/nfd-worker). Not simulated: CPU, memory, USB, storage, network and custom/local
// sources, NodeFeatureRules, NodeFeature objects, taints and extended resources, and the -instance
// and -extra-label-ns flags.
type nfdStandIn struct {
	// real reports the worker pods NFD's own programs run for (nil: none); the stand-in skips them.
	real func(*corev1.Pod) bool
	cs   kubernetes.Interface
	hw   map[string]standin.Hardware
	logf func(string, ...any)

	nodes      corelisters.NodeLister
	pods       cache.Indexer
	daemonSets appslisters.DaemonSetLister
	configMaps corelisters.ConfigMapLister
	queue      workqueue.TypedRateLimitingInterface[string]

	// mu guards the maps; an entry is touched only by the worker reconciling its node (the queue
	// never hands one key to two workers at once). They live in memory: a restarted stand-in forgets
	// what it set, which a sandbox never needs.
	mu    sync.Mutex
	owned map[string]*nfdOwnership
	// configs is, per node, the config its current worker pod started with.
	configs map[string]nfdWorkerConfig
}

// nfdWorkers is how many nodes the stand-in labels at once: nfd-master's default
// -nfd-api-parallelism (https://kubernetes-sigs.github.io/node-feature-discovery/v0.19/reference/master-commandline-reference.html).
const nfdWorkers = 10

// nfdWorkerConfig is the config one worker pod runs with.
type nfdWorkerConfig struct {
	pod types.UID
	cfg nfdPCIConfig
}

// runNFDStandIn runs the NFD stand-in until ctx is done and then returns nil. hw maps node names to
// their hardware; nodes not in it have none (no GPUs, empty os-release). It needs list/watch on nodes,
// pods, daemonsets and configmaps and patch on nodes.
func Run(ctx context.Context, cs kubernetes.Interface, hw map[string]standin.Hardware, logf func(string, ...any)) error {
	return RunExcept(ctx, cs, hw, nil, logf)
}

// RunExcept is Run leaving alone the worker pods real reports true for: those NFD's own nfd-worker
// runs for (package sandbox/nfd, NFD v0.19.0's image), while the stand-in labels the nodes of NFD's
// other versions (the v0.18.2 an older GPU operator release's chart pins, say), which the sandbox
// has no build of.
func RunExcept(ctx context.Context, cs kubernetes.Interface, hw map[string]standin.Hardware, real func(*corev1.Pod) bool, logf func(string, ...any)) error {
	factory := informers.NewSharedInformerFactory(cs, 0)
	s := &nfdStandIn{
		real:       real,
		cs:         cs,
		hw:         hw,
		logf:       logf,
		nodes:      factory.Core().V1().Nodes().Lister(),
		pods:       factory.Core().V1().Pods().Informer().GetIndexer(),
		daemonSets: factory.Apps().V1().DaemonSets().Lister(),
		configMaps: factory.Core().V1().ConfigMaps().Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nfd-stand-in"}),
		owned:   map[string]*nfdOwnership{},
		configs: map[string]nfdWorkerConfig{},
	}
	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{factory.Core().V1().Nodes().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { s.enqueueNode(obj) },
			UpdateFunc: s.nodeUpdated,
			DeleteFunc: func(obj any) { s.enqueueNode(obj) },
		}},
		{factory.Core().V1().Pods().Informer(), standin.OnAnyChange(s.podChanged)},
		{factory.Apps().V1().DaemonSets().Informer(), standin.OnAnyChange(func(obj any) {
			if ds, ok := obj.(*appsv1.DaemonSet); ok && standin.PodSpecRuns(&ds.Spec.Template.Spec, "nfd-worker") {
				s.enqueueAll()
			}
		})},
		{factory.Core().V1().ConfigMaps().Informer(), standin.OnAnyChange(func(obj any) {
			if cm, ok := obj.(*corev1.ConfigMap); ok && nfdWorkerConfKey(cm) != "" {
				s.enqueueAll()
			}
		})},
	}
	if err := standin.IndexPods(factory.Core().V1().Pods().Informer()); err != nil {
		return fmt.Errorf("nfd stand-in: %w", err)
	}
	var synced []cache.InformerSynced
	for _, h := range handlers {
		reg, err := h.informer.AddEventHandler(h.handler)
		if err != nil {
			return fmt.Errorf("nfd stand-in: watch: %w", err)
		}
		synced = append(synced, reg.HasSynced)
	}
	return standin.RunController(ctx, "nfd stand-in", []standin.InformerFactory{factory}, synced, s.queue, nfdWorkers, s.reconcile, logf)
}

func (s *nfdStandIn) enqueueNode(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if n, ok := obj.(*corev1.Node); ok {
		s.queue.Add(n.Name)
	}
}

// nodeUpdated ignores status heartbeats (kwok renews conditions every few seconds) and reacts to what
// the labels depend on or what someone may have changed under the stand-in.
func (s *nfdStandIn) nodeUpdated(oldObj, newObj any) {
	o, ok1 := oldObj.(*corev1.Node)
	n, ok2 := newObj.(*corev1.Node)
	if !ok1 || !ok2 {
		return
	}
	if !maps.Equal(o.Labels, n.Labels) || !maps.Equal(o.Annotations, n.Annotations) || o.Status.NodeInfo != n.Status.NodeInfo {
		s.queue.Add(n.Name)
	}
}

func (s *nfdStandIn) podChanged(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	switch {
	case standin.PodSpecRuns(&p.Spec, "nfd-master"):
		s.enqueueAll()
	case standin.PodSpecRuns(&p.Spec, "nfd-worker") && p.Spec.NodeName != "":
		s.queue.Add(p.Spec.NodeName)
	}
}

func (s *nfdStandIn) enqueueAll() {
	nodes, err := s.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	for _, n := range nodes {
		s.queue.Add(n.Name)
	}
}

// nfdWorkerConfKey is the key of cm that holds an nfd-worker.conf, or "".
func nfdWorkerConfKey(cm *corev1.ConfigMap) string {
	for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
		if strings.HasSuffix(k, standin.NFDWorkerConfSuffix) {
			return k
		}
	}
	return ""
}

// installed reports whether an nfd-worker DaemonSet exists (and is not being deleted).
func (s *nfdStandIn) installed() (bool, error) {
	all, err := s.daemonSets.List(labels.Everything())
	if err != nil {
		return false, err
	}
	for _, ds := range all {
		if ds.DeletionTimestamp == nil && standin.PodSpecRuns(&ds.Spec.Template.Spec, "nfd-worker") {
			return true, nil
		}
	}
	return false, nil
}

// runningWorker returns the Running nfd-worker pod on node, if a Running and Ready nfd-master exists;
// otherwise nil.
func (s *nfdStandIn) runningWorker(node string) (*corev1.Pod, error) {
	masters, err := standin.IndexedPods(s.pods, standin.PodsRunningNFDMaster, "nfd-master")
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(masters, standin.PodRunningReady) {
		return nil, nil
	}
	onNode, err := standin.IndexedPods(s.pods, standin.PodsByNode, node)
	if err != nil {
		return nil, err
	}
	var worker *corev1.Pod
	for _, p := range onNode {
		if p.Status.Phase == corev1.PodRunning && standin.PodSpecRuns(&p.Spec, "nfd-worker") && !standin.PodSpecRuns(&p.Spec, "nfd-master") &&
			(s.real == nil || !s.real(p)) {
			worker = p
		}
	}
	return worker, nil
}

// workerConfig is the config pod runs with: read once per pod, like nfd-worker reads its file at start.
func (s *nfdStandIn) workerConfig(pod *corev1.Pod) nfdPCIConfig {
	s.mu.Lock()
	c, ok := s.configs[pod.Spec.NodeName]
	s.mu.Unlock()
	if ok && c.pod == pod.UID {
		return c.cfg
	}
	cfg, found := s.readWorkerConfig(pod)
	if found {
		s.mu.Lock()
		s.configs[pod.Spec.NodeName] = nfdWorkerConfig{pod: pod.UID, cfg: cfg}
		s.mu.Unlock()
	}
	return cfg
}

// readWorkerConfig reads the worker's config from the ConfigMap volume (plain or projected) that
// carries an nfd-worker.conf key; without one, NFD's defaults apply and found is false.
func (s *nfdStandIn) readWorkerConfig(pod *corev1.Pod) (cfg nfdPCIConfig, found bool) {
	var names []string
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil {
			names = append(names, v.ConfigMap.Name)
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					names = append(names, src.ConfigMap.Name)
				}
			}
		}
	}
	for _, name := range names {
		cm, err := s.configMaps.ConfigMaps(pod.Namespace).Get(name)
		if err != nil {
			continue
		}
		if key := nfdWorkerConfKey(cm); key != "" {
			cfg, err := parseNFDWorkerConfig(cm.Data[key])
			if err != nil {
				s.logf("nfd stand-in: %s/%s: %v; using defaults", cm.Namespace, cm.Name, err)
			}
			return cfg, true
		}
	}
	cfg, _ = parseNFDWorkerConfig("")
	return cfg, false
}

func (s *nfdStandIn) reconcile(ctx context.Context, name string) error {
	node, err := s.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		s.mu.Lock()
		delete(s.owned, name)
		delete(s.configs, name)
		s.mu.Unlock()
		return nil
	}
	if err != nil {
		return err
	}
	installed, err := s.installed()
	if err != nil {
		return err
	}
	var desired map[string]string
	if installed {
		worker, err := s.runningWorker(name)
		if err != nil {
			return err
		}
		if worker == nil {
			return nil // keep whatever NFD labelled before, as real NFD does
		}
		cfg := s.workerConfig(worker)
		hw := s.hw[name]
		if hw.GPUs > 0 && !cfg.classWhitelisted(hw.GPUPCIClass) {
			hw.GPUs = 0 // nfd-worker does not report devices outside the whitelist
		}
		desired = Labels(hw, node.Status.NodeInfo, cfg.DeviceLabelFields)
	}
	return s.apply(ctx, node, desired)
}

// apply makes the stand-in's labels on node equal desired (nil or empty: none) with one merge patch,
// and only if something changes.
func (s *nfdStandIn) apply(ctx context.Context, node *corev1.Node, desired map[string]string) error {
	s.mu.Lock()
	own := s.owned[node.Name]
	if own == nil {
		own = &nfdOwnership{labels: map[string]bool{}}
		s.owned[node.Name] = own
	}
	s.mu.Unlock()
	labelPatch := map[string]any{}
	for k, v := range desired {
		if cur, ok := node.Labels[k]; !ok || cur != v {
			labelPatch[k] = v
			own.labels[k] = true
		}
	}
	for k := range own.labels {
		if _, keep := desired[k]; !keep {
			if _, ok := node.Labels[k]; ok {
				labelPatch[k] = nil
			}
			delete(own.labels, k)
		}
	}
	annPatch := map[string]any{}
	cur, has := node.Annotations[FeatureLabelsAnnotation]
	if len(desired) > 0 {
		names := make([]string, 0, len(desired))
		for k := range desired {
			names = append(names, strings.TrimPrefix(k, FeatureLabelNs+"/"))
		}
		slices.Sort(names)
		want := strings.Join(names, ",")
		if !has || cur != want {
			if !own.annotated {
				own.annotated, own.prior, own.hadPrior = true, cur, has
			}
			annPatch[FeatureLabelsAnnotation] = want
		}
	} else if own.annotated {
		switch {
		case own.hadPrior && (!has || cur != own.prior):
			annPatch[FeatureLabelsAnnotation] = own.prior
		case !own.hadPrior && has:
			annPatch[FeatureLabelsAnnotation] = nil
		}
		own.annotated = false
	}
	if len(labelPatch) == 0 && len(annPatch) == 0 {
		return nil
	}
	meta := map[string]any{}
	if len(labelPatch) > 0 {
		meta["labels"] = labelPatch
	}
	if len(annPatch) > 0 {
		meta["annotations"] = annPatch
	}
	data, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	// As nfd-master writes them: its field manager is its program's name, since it builds its client
	// without a user agent (kubernetes-sigs/node-feature-discovery pkg/utils/kubernetes.go, GetKubeconfig),
	// so uninstall can tell NFD's labels from an admin's.
	if _, err := s.cs.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, data, metav1.PatchOptions{FieldManager: nfdMasterFieldManager}); err != nil {
		return fmt.Errorf("label node %s: %w", node.Name, err)
	}
	set, removed := 0, 0
	for _, v := range labelPatch {
		if v == nil {
			removed++
		} else {
			set++
		}
	}
	s.logf("nfd stand-in: node %s: %d feature labels set, %d removed", node.Name, set, removed)
	return nil
}
