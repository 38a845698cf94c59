package detect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuctl/gpuctl/internal/kube"
)

// Clients is what Gather reads the cluster with.
type Clients struct {
	// Kube is required.
	Kube kubernetes.Interface
	// Discovery defaults to Kube.Discovery().
	Discovery discovery.DiscoveryInterface
	// Dynamic reads the custom resources (ClusterPolicy, GPUCluster, Subscription, ClusterVersion).
	// If nil they are skipped with a warning.
	Dynamic dynamic.Interface
}

// The custom resources detection reads, with the sources that name them. Functions rather than
// package variables, so nothing at package level can be changed.

// clusterPolicyGVR: NVIDIA/gpu-operator api/nvidia/v1/clusterpolicy_types.go@v26.7.0, ClusterPolicy, cluster-scoped.
func clusterPolicyGVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "nvidia.com", Version: "v1", Resource: "clusterpolicies"}
}

// gpuClusterGVR: NVIDIA/gpu-operator deployments/gpu-operator@v26.7.0, GPUCluster (DRA), GPU Operator v26.7.0+.
func gpuClusterGVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "nvidia.com", Version: "v1alpha1", Resource: "gpuclusters"}
}

// subscriptionGVR: NVIDIA/cloud-native-docs openshift/install-gpu-ocp.rst, the operator and NFD come from OLM
// Subscriptions.
func subscriptionGVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "subscriptions"}
}

// clusterVersionGVR: ClusterVersion "version"; the operator reads it (getOpenshiftVersion in NVIDIA/gpu-operator
// controllers/clusterinfo/clusterinfo.go) for the OpenShift version.
func clusterVersionGVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "clusterversions"}
}

// OLM packages that matter: NVIDIA's certified operator and Red Hat's NFD Operator (NVIDIA/cloud-native-docs
// openshift/install-gpu-ocp.rst and install-nfd.rst), plus the community names of both.
func interestingPackage(pkg string) bool {
	switch pkg {
	case "gpu-operator-certified", "gpu-operator", "nfd", "node-feature-discovery", "node-feature-discovery-operator":
		return true
	}
	return false
}

// Gather reads everything detection needs, one LIST per resource kind. Listing nodes and reading
// discovery must succeed; every other read is optional: Forbidden (or, for custom resources, an
// unserved type) is recorded in Snapshot.Warnings or treated as "none", any other error fails.
func Gather(ctx context.Context, c Clients) (*Snapshot, error) {
	if c.Kube == nil {
		return nil, errors.New("gather cluster facts: no Kubernetes client")
	}
	if c.Discovery == nil {
		c.Discovery = c.Kube.Discovery()
	}
	g := &gatherer{c: c, s: &Snapshot{}}

	// The reads are independent but for the custom resources, which are listed only where discovery
	// says their group is served: they run side by side, so detection takes about as long as its
	// slowest chain of two requests rather than the sum of ten. Each chain writes its own fields of the
	// snapshot; warnings go through warn. The first error ends the other chains (an API server that
	// stops answering fails detection once, not once per chain after each has waited), and the first
	// error in this order that is not that ending is returned, whatever finished first.
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chains := [][]func(context.Context) error{
		{g.nodes},
		{g.discovery, g.clusterPolicies, g.subscriptions, g.clusterVersion, g.admissionPolicies},
		{g.kubeadmConfig},
		{g.workloads, g.statefulSets},
		{g.pendingGPUPods},
		{g.gpuToleration},
		{g.helmReleases},
		{g.nvaieSecrets},
	}
	errs := make([]error, len(chains))
	var wg sync.WaitGroup
	for i, chain := range chains {
		wg.Go(func() {
			for _, step := range chain {
				if errs[i] = step(ctx); errs[i] != nil {
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil || (parent.Err() == nil && errors.Is(err, context.Canceled)) {
			continue // a chain another one's error ended
		}
		return nil, err
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(g.s.Warnings)
	return g.s, nil
}

type gatherer struct {
	c Clients
	s *Snapshot
	// groupsKnown is false when discovery was refused; optional reads are then tried anyway.
	groupsKnown bool
	// mu guards s.Warnings, which every concurrent read may add to.
	mu sync.Mutex
}

// warn adds warnings to the snapshot; safe for concurrent use.
func (g *gatherer) warn(msgs ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.s.Warnings = append(g.s.Warnings, msgs...)
}

// nodes lists every node, the one read detection cannot do without.
func (g *gatherer) nodes(ctx context.Context) error {
	// Detection reads everything a node says except who wrote which field and which images its
	// kubelet holds, the two largest parts of a node and of no use to it.
	nodes, err := kube.ListNodes(ctx, g.c.Kube, func(n *corev1.Node) *corev1.Node {
		n.ManagedFields = nil
		n.Status.Images = nil
		return n
	})
	if err != nil {
		return err
	}
	g.s.Nodes = make([]corev1.Node, len(nodes))
	for i, n := range nodes {
		g.s.Nodes[i] = *n
	}
	return nil
}

// optional turns a Forbidden error on an optional read into a warning.
func (g *gatherer) optional(what string, err error) error {
	if err == nil {
		return nil
	}
	if apierrors.IsForbidden(err) {
		g.warn(fmt.Sprintf("%s: forbidden, so detection cannot see it (%v)", what, err))
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (g *gatherer) served(group string) bool {
	if !g.groupsKnown {
		return true
	}
	for _, x := range g.s.APIGroups {
		if x == group {
			return true
		}
	}
	return false
}

func (g *gatherer) discovery(ctx context.Context) error {
	// kubectl's disk cache of discovery (~/.kube/cache, which the clients share) may be hours old and
	// hide an API group added since, such as the Prometheus Operator's installed a minute ago: apiGroups
	// reads /apis from the server, and the cache is invalidated for the clients that read it later
	// (the REST mapper). The request count stays the same.
	if cd, ok := g.c.Discovery.(discovery.CachedDiscoveryInterface); ok {
		cd.Invalidate()
	}
	d := discovery.ToDiscoveryInterfaceWithContext(g.c.Discovery)
	groups, err := apiGroups(ctx, g.c.Discovery, d)
	switch {
	case err == nil:
		g.groupsKnown = true
		for _, grp := range groups.Groups {
			if grp.Name != "" {
				g.s.APIGroups = append(g.s.APIGroups, grp.Name)
			}
			if grp.Name == ResourceGroup {
				for _, gv := range grp.Versions {
					g.s.ResourceAPIVersions = append(g.s.ResourceAPIVersions, gv.Version)
				}
			}
		}
		sort.Strings(g.s.APIGroups)
	case apierrors.IsForbidden(err):
		g.warn(fmt.Sprintf("discover API groups: forbidden, so distributions known by their API groups (OpenShift, Tanzu, Rancher) may be missed (%v)", err))
	default:
		return fmt.Errorf("discover API groups: %w", err)
	}

	v, err := d.ServerVersionWithContext(ctx)
	if err != nil {
		g.warn(fmt.Sprintf("read server version: %v", err))
		return nil
	}
	g.s.ServerVersion = v
	return nil
}

// apiGroups lists the named API groups with one request, GET /apis: client-go's ServerGroups also
// asks /api for the legacy core group, which every cluster serves and detection never needs.
func apiGroups(ctx context.Context, c discovery.DiscoveryInterface, d discovery.DiscoveryInterfaceWithContext) (*metav1.APIGroupList, error) {
	rc := c.RESTClient()
	if rc == nil || reflect.ValueOf(rc).IsNil() {
		// Fake discovery clients have no REST client.
		return d.ServerGroupsWithContext(ctx)
	}
	raw, err := rc.Get().AbsPath("/apis").SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	var groups metav1.APIGroupList
	if err := json.Unmarshal(raw, &groups); err != nil {
		return nil, fmt.Errorf("decode /apis: %w", err)
	}
	return &groups, nil
}

// kubeadmConfigMap is the ConfigMap kubeadm uploads at init: the one ConfigMap Gather reads for a
// distro.ConfigMap signal (Snapshot.KubeadmConfig).
const kubeadmConfigMap = "kube-system/kubeadm-config"

// kubeadmConfig records whether kubeadmConfigMap exists; a read that is refused is a warning.
func (g *gatherer) kubeadmConfig(ctx context.Context) error {
	ns, name, _ := strings.Cut(kubeadmConfigMap, "/")
	_, err := g.c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		g.s.KubeadmConfig = true
		return nil
	case apierrors.IsNotFound(err):
		return nil
	default:
		return g.optional("read ConfigMap "+kubeadmConfigMap, err)
	}
}

func (g *gatherer) workloads(ctx context.Context) error {
	dss, err := g.c.Kube.AppsV1().DaemonSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		if err := g.optional("list DaemonSets", err); err != nil {
			return err
		}
	} else {
		for i := range dss.Items {
			ds := &dss.Items[i]
			w := fromDaemonSet(ds)
			if Classify(w) != "" {
				g.s.Workloads = append(g.s.Workloads, w)
			}
			g.s.PodTemplates = append(g.s.PodTemplates, podTemplate("DaemonSet", ds.Namespace, ds.Name, &ds.Spec.Template.Spec))
		}
	}

	deps, err := g.c.Kube.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return g.optional("list Deployments", err)
	}
	for i := range deps.Items {
		d := &deps.Items[i]
		w := fromDeployment(d)
		if Classify(w) != "" {
			g.s.Workloads = append(g.s.Workloads, w)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas > 0 {
			g.s.PodTemplates = append(g.s.PodTemplates, podTemplate("Deployment", d.Namespace, d.Name, &d.Spec.Template.Spec))
		}
	}
	return nil
}

// statefulSets lists StatefulSets for the GPU taint's analysis (PodTemplates).
func (g *gatherer) statefulSets(ctx context.Context) error {
	sts, err := g.c.Kube.AppsV1().StatefulSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return g.optional("list StatefulSets", err)
	}
	for i := range sts.Items {
		s := &sts.Items[i]
		if s.Spec.Replicas == nil || *s.Spec.Replicas > 0 {
			g.s.PodTemplates = append(g.s.PodTemplates, podTemplate("StatefulSet", s.Namespace, s.Name, &s.Spec.Template.Spec))
		}
	}
	return nil
}

// pendingGPUPods lists the Pending pods no node was chosen for yet (a field selector keeps the list to
// those) and keeps the ones that request GPUs.
func (g *gatherer) pendingGPUPods(ctx context.Context) error {
	opts := metav1.ListOptions{FieldSelector: "status.phase=Pending,spec.nodeName=", Limit: 500}
	for {
		pods, err := g.c.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return g.optional("list Pending pods", err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			// A fake clientset ignores field selectors; a real server has applied them already.
			if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending || !templateRequestsGPU(&p.Spec) {
				continue
			}
			kind, name := podOwner(p)
			g.s.PendingGPUPods = append(g.s.PendingGPUPods, podTemplate(kind, p.Namespace, name, &p.Spec))
		}
		if opts.Continue = pods.Continue; opts.Continue == "" {
			return nil
		}
	}
}

// admissionPolicies asks discovery whether admissionregistration.k8s.io/v1 serves
// mutatingadmissionpolicies (KEP-3962: v1 and on by default from Kubernetes 1.36).
func (g *gatherer) admissionPolicies(ctx context.Context) error {
	const gv = "admissionregistration.k8s.io/v1"
	if g.groupsKnown && !g.served("admissionregistration.k8s.io") {
		served := false
		g.s.MutatingAdmissionPolicy = &served
		return nil
	}
	list, err := discovery.ToDiscoveryInterfaceWithContext(g.c.Discovery).ServerResourcesForGroupVersionWithContext(ctx, gv)
	switch {
	case apierrors.IsNotFound(err):
		served := false
		g.s.MutatingAdmissionPolicy = &served
		return nil
	case err != nil:
		if ctx.Err() != nil {
			return ctx.Err()
		}
		g.warn(fmt.Sprintf("discover %s: %v; whether it serves MutatingAdmissionPolicy is not known", gv, err))
		return nil
	}
	served := false
	for _, r := range list.APIResources {
		if r.Name == "mutatingadmissionpolicies" {
			served = true
		}
	}
	g.s.MutatingAdmissionPolicy = &served
	return nil
}

// gpuToleration finds out whether the API server adds the GPU toleration to pods that request GPUs.
func (g *gatherer) gpuToleration(ctx context.Context) error {
	added, err := ProbeGPUToleration(ctx, g.c.Kube)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		g.warn(fmt.Sprintf("find out whether the API server adds the GPU toleration (a server-side dry-run create of a pod in namespace %s): %v", ProbeNamespace, err))
		return nil
	}
	g.s.GPUToleration = &added
	return nil
}

// WorkloadFromDaemonSet describes a DaemonSet for Classify, so callers outside detection recognise
// components (e.g. the NFD worker) exactly as detection does.
func WorkloadFromDaemonSet(ds *appsv1.DaemonSet) Workload { return fromDaemonSet(ds) }

func fromDaemonSet(ds *appsv1.DaemonSet) Workload {
	w := fromPodTemplate("DaemonSet", ds.ObjectMeta, &ds.Spec.Template.Spec)
	w.Desired, w.Ready = ds.Status.DesiredNumberScheduled, ds.Status.NumberReady
	return w
}

func fromDeployment(d *appsv1.Deployment) Workload {
	w := fromPodTemplate("Deployment", d.ObjectMeta, &d.Spec.Template.Spec)
	w.Desired = 1
	if d.Spec.Replicas != nil {
		w.Desired = *d.Spec.Replicas
	}
	w.Ready = d.Status.ReadyReplicas
	return w
}

func fromPodTemplate(kind string, meta metav1.ObjectMeta, spec *corev1.PodSpec) Workload {
	w := Workload{
		Kind:          kind,
		Namespace:     meta.Namespace,
		Name:          meta.Name,
		Labels:        meta.Labels,
		HelmRelease:   meta.Annotations["meta.helm.sh/release-name"],
		HelmNamespace: meta.Annotations["meta.helm.sh/release-namespace"],
		NodeSelector:  spec.NodeSelector,
		Tolerations:   spec.Tolerations,
	}
	if ref := metav1.GetControllerOfNoCopy(&meta); ref != nil {
		w.Owner = ref.Kind + "/" + ref.Name
	}
	for _, c := range spec.InitContainers {
		w.Images = append(w.Images, c.Image)
	}
	for _, c := range spec.Containers {
		w.Images = append(w.Images, c.Image)
		if cmd := strings.TrimSpace(strings.Join(append(append([]string{}, c.Command...), c.Args...), " ")); cmd != "" {
			w.Commands = append(w.Commands, cmd)
		}
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil {
		w.Affinity = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return w
}

// helmReleases lists Helm's storage with a label selector, in Secrets (Helm's default driver) and
// ConfigMaps (HELM_DRIVER=configmap), cluster-wide.
func (g *gatherer) helmReleases(ctx context.Context) error {
	var records []helmRecord
	opts := metav1.ListOptions{LabelSelector: helmOwnerSelector}

	secrets, err := g.c.Kube.CoreV1().Secrets(metav1.NamespaceAll).List(ctx, opts)
	if err != nil {
		if err := g.optional("list Helm release Secrets (label owner=helm)", err); err != nil {
			return err
		}
	} else {
		for i := range secrets.Items {
			sec := &secrets.Items[i]
			records = append(records, helmRecord{
				namespace: sec.Namespace,
				labels:    sec.Labels,
				storage:   "Secret",
				payload:   func() string { return string(sec.Data[helmPayloadKey]) },
			})
		}
	}

	cms, err := g.c.Kube.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, opts)
	if err != nil {
		if err := g.optional("list Helm release ConfigMaps (label owner=helm)", err); err != nil {
			return err
		}
	} else {
		for i := range cms.Items {
			cm := &cms.Items[i]
			records = append(records, helmRecord{
				namespace: cm.Namespace,
				labels:    cm.Labels,
				storage:   "ConfigMap",
				payload:   func() string { return cm.Data[helmPayloadKey] },
			})
		}
	}

	releases, warnings := newestReleases(records)
	g.s.HelmReleases = releases
	g.warn(warnings...)
	return nil
}

// listCustom lists a custom resource cluster-wide. An unserved type (NotFound) means "none".
func (g *gatherer) listCustom(ctx context.Context, gvr schema.GroupVersionResource) ([]unstructured.Unstructured, error) {
	if g.c.Dynamic == nil {
		g.warn(fmt.Sprintf("list %s: no dynamic client", gvr.GroupResource()))
		return nil, nil
	}
	list, err := g.c.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, g.optional("list "+gvr.GroupResource().String(), err)
	}
	return list.Items, nil
}

func (g *gatherer) clusterPolicies(ctx context.Context) error {
	if !g.served(clusterPolicyGVR().Group) {
		return nil
	}
	items, err := g.listCustom(ctx, clusterPolicyGVR())
	if err != nil {
		return err
	}
	for i := range items {
		g.s.ClusterPolicies = append(g.s.ClusterPolicies, clusterPolicyFrom(&items[i]))
	}
	gcs, err := g.listCustom(ctx, gpuClusterGVR())
	if err != nil {
		return err
	}
	for i := range gcs {
		g.s.GPUClusters = append(g.s.GPUClusters, gcs[i].GetName())
	}
	return nil
}

func clusterPolicyFrom(u *unstructured.Unstructured) ClusterPolicy {
	cp := ClusterPolicy{Name: u.GetName(), Created: u.GetCreationTimestamp().Time}
	cp.State, _, _ = unstructured.NestedString(u.Object, "status", "state")
	cp.Namespace, _, _ = unstructured.NestedString(u.Object, "status", "namespace")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		cp.ReadyReason, _ = m["reason"].(string)
		cp.ReadyMessage, _ = m["message"].(string)
	}
	return cp
}

func (g *gatherer) subscriptions(ctx context.Context) error {
	if !g.served(subscriptionGVR().Group) {
		return nil
	}
	items, err := g.listCustom(ctx, subscriptionGVR())
	if err != nil {
		return err
	}
	for i := range items {
		u := &items[i]
		sub := Subscription{Namespace: u.GetNamespace(), Name: u.GetName()}
		sub.Package, _, _ = unstructured.NestedString(u.Object, "spec", "name")
		if !interestingPackage(sub.Package) {
			continue
		}
		sub.Channel, _, _ = unstructured.NestedString(u.Object, "spec", "channel")
		sub.Source, _, _ = unstructured.NestedString(u.Object, "spec", "source")
		sub.InstalledCSV, _, _ = unstructured.NestedString(u.Object, "status", "installedCSV")
		sub.CurrentCSV, _, _ = unstructured.NestedString(u.Object, "status", "currentCSV")
		sub.State, _, _ = unstructured.NestedString(u.Object, "status", "state")
		sub.HelmRelease, sub.HelmNamespace = u.GetAnnotations()["meta.helm.sh/release-name"], u.GetAnnotations()["meta.helm.sh/release-namespace"]
		g.s.Subscriptions = append(g.s.Subscriptions, sub)
	}
	return nil
}

func (g *gatherer) clusterVersion(ctx context.Context) error {
	if !g.groupsKnown || !g.served(clusterVersionGVR().Group) {
		return nil
	}
	if g.c.Dynamic == nil {
		return nil
	}
	u, err := g.c.Dynamic.Resource(clusterVersionGVR()).Get(ctx, "version", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return g.optional("read ClusterVersion version", err)
	}
	cv := &ClusterVersion{}
	cv.Desired, _, _ = unstructured.NestedString(u.Object, "status", "desired", "version")
	hist, _, _ := unstructured.NestedSlice(u.Object, "status", "history")
	for _, h := range hist {
		m, ok := h.(map[string]any)
		if !ok || m["state"] != "Completed" {
			continue
		}
		if v, _ := m["version"].(string); v != "" {
			cv.Completed = append(cv.Completed, v)
		}
	}
	g.s.ClusterVersion = cv
	return nil
}

// Error is a failure to read what detection needs from the cluster (as opposed to a cluster
// detection could read and judge). Callers tell it apart with errors.As.
type Error struct{ Err error }

func (e *Error) Error() string { return "detect: " + e.Err.Error() }

// Unwrap returns the read's error (an API status error, a context error…).
func (e *Error) Unwrap() error { return e.Err }

// Run gathers what detection reads and analyzes it; a failed read is an *Error.
func Run(ctx context.Context, c Clients) (*Result, error) {
	snap, err := Gather(ctx, c)
	if err != nil {
		return nil, &Error{Err: err}
	}
	r := Analyze(snap)
	return &r, nil
}

// From is the part of a kube.Clients that detection reads with.
func From(c *kube.Clients) Clients {
	return Clients{Kube: c.Kube, Discovery: c.Discovery, Dynamic: c.Dynamic}
}
