package olm

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
	"github.com/gpuctl/gpuctl/internal/bundle"
)

// The APIs OLM v0 serves on OpenShift, which the OpenShift flavour registers as CRDs (NVIDIA/cloud-native-docs openshift/install-gpu-ocp.rst), and the NFD operator's nodefeaturediscoveries.
var (
	SubscriptionsGVR     = schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "subscriptions"}
	olmInstallPlansGVR   = schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "installplans"}
	CSVsGVR              = schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "clusterserviceversions"}
	olmCatalogSourcesGVR = schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "catalogsources"}
	OperatorGroupsGVR    = schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1", Resource: "operatorgroups"}
	PackageManifestsGVR  = schema.GroupVersionResource{Group: "packages.operators.coreos.com", Version: "v1", Resource: "packagemanifests"}
	nfdOpenShiftGVR      = schema.GroupVersionResource{Group: "nfd.openshift.io", Version: "v1", Resource: "nodefeaturediscoveries"}
)

const (
	olmAPIVersion      = "operators.coreos.com/v1alpha1"
	olmKindSub         = "Subscription"
	olmKindPlan        = "InstallPlan"
	olmKindCSV         = "ClusterServiceVersion"
	olmKindGroup       = "OperatorGroup"
	nfdKindOpenShift   = "NodeFeatureDiscovery"
	nfdOpenShiftAPI    = "nfd.openshift.io/v1"
	olmOwnerLabel      = "olm.owner"
	olmOwnerKindLabel  = "olm.owner.kind"
	olmOwnerNSLabel    = "olm.owner.namespace"
	olmPackageLabelFmt = "operators.coreos.com/%s.%s"

	// olmNoGroupMessage and its reason are what OLM v0 puts on an approved InstallPlan in a namespace
	// without exactly one OperatorGroup (operator-lifecycle-manager pkg/controller/operators/catalog).
	olmNoGroupMessage  = "no operator group found that is managing this namespace"
	olmInstallCheckErr = "InstallCheckFailed"

	// nfdOperatorDeployment is the NFD operator's Deployment in Red Hat's nfd bundle.
	nfdOperatorDeployment = "nfd-controller-manager"
	// nfdOperandImageEnv is how Red Hat's NFD operator learns its operand image.
	nfdOperandImageEnv = "NODE_FEATURE_DISCOVERY_IMAGE"
	// nfdDefaultOperandImage is the operand of OpenShift 4.19's NFD operator.
	nfdDefaultOperandImage = "registry.redhat.io/openshift4/ose-node-feature-discovery-rhel9:v4.19"
)

// olmKey names one object the OLM stand-in reconciles.
type olmKey struct {
	kind, namespace, name string
}

// plannedInstall remembers the InstallPlan created for a Subscription, so that a reconcile running
// before the informer has seen the new plan does not create a second one.
type plannedInstall struct {
	subUID string
	plan   string
}

// olmStandIn is a STAND-IN for Operator Lifecycle Manager v0 (the catalog and olm operators of
// OpenShift 4.x) plus the two operators' own work that cannot happen without their images: Red Hat's
// NFD operator deploying NFD for a NodeFeatureDiscovery. It behaves, through the API, like OLM does
// for the flow NVIDIA documents for OpenShift (NVIDIA/cloud-native-docs openshift/install-gpu-ocp.rst):
//
//   - Subscription → resolve the package in its catalog's PackageManifest (spec.channel, else the
//     default channel; spec.startingCSV if the channel lists it) → an InstallPlan (install-xxxxx,
//     owned by the Subscription) whose spec.approved follows spec.installPlanApproval, phase
//     RequiresApproval until someone approves it; the Subscription's status shows
//     CatalogSourcesUnhealthy / ResolutionFailed / InstallPlanPending, state UpgradePending or
//     AtLatestKnown, installPlanRef, currentCSV and installedCSV as OLM's do;
//   - approved InstallPlan → needs exactly one OperatorGroup in the namespace (else Installed=False,
//     InstallCheckFailed, as OLM) → creates the ClusterServiceVersion from the plan's step manifest,
//     with the olm.operatorGroup/olm.targetNamespaces annotations → phase Complete;
//   - ClusterServiceVersion → Pending → InstallReady → Installing: creates, from its install strategy,
//     the service accounts, Roles/ClusterRoles with their bindings and the Deployments, labelled
//     olm.owner* and (namespaced ones) owned by the CSV → Succeeded once every Deployment is Available;
//     deleting the CSV deletes its cluster-scoped objects (garbage collection takes the rest);
//   - OperatorGroup → status.namespaces;
//   - NodeFeatureDiscovery (nfd.openshift.io/v1) in a namespace where the nfd operator's CSV has
//     Succeeded → ConfigMap nfd-worker (nfd-worker.conf = spec.workerConfig.configData), DaemonSet
//     nfd-worker mounting it, Deployment nfd-master, all owned by the CR, and Available/Progressing
//     conditions. The NFD stand-in then labels nodes from those pods as it would for any NFD.
//
// Simplified: catalogs are the PackageManifest objects (no registry pods, no bundle unpacking; a
// catalog counts as present if its CatalogSource object exists or a PackageManifest names it); a
// PackageManifest carries no install strategy, so the stand-in knows the two bundles it must install
// (gpu-operator-certified and nfd, olmBundleStrategy) and installs an empty strategy for any other;
// bundle CRDs are the ones the sandbox is given per package and CSV version (for
// gpu-operator-certified, that release's bundle/manifests CRDs from NVIDIA's sources), created when
// missing and never upgraded; the ClusterRoles grant everything instead of the bundle's exact
// clusterPermissions; upgrades only as NVIDIA's OpenShift upgrade guide does them (the Subscription's
// channel changes; the new channel head's InstallPlan, once approved, creates a CSV with spec.replaces
// naming the installed one, which takes over the old CSV's Deployments, service accounts and bundle
// CRDs, and the replaced CSV is deleted once the new one has Succeeded), no dependency resolution, install-mode or OperatorGroup selector checks, CSV
// copies into target namespaces, operator conditions or catalog health entries; a Succeeded CSV stays
// Succeeded if its Deployment later becomes unavailable; objects the stand-in created are re-created
// if deleted but never updated.
type olmStandIn struct {
	cs   kubernetes.Interface
	dyn  dynamic.Interface
	logf func(string, ...any)
	// bundleCRDs are applied before a package's CSV objects, as OLM applies a bundle's CRDs.
	bundleCRDs func(pkg, version string) ([]*unstructured.Unstructured, error)

	subs, plans, csvs, groups, packages, nfds cache.GenericLister
	// catalogs is nil when the CatalogSource API is not served.
	catalogs cache.GenericLister

	deployments         appslisters.DeploymentLister
	daemonSets          appslisters.DaemonSetLister
	configMaps          corelisters.ConfigMapLister
	serviceAccounts     corelisters.ServiceAccountLister
	roles               rbaclisters.RoleLister
	roleBindings        rbaclisters.RoleBindingLister
	clusterRoles        rbaclisters.ClusterRoleLister
	clusterRoleBindings rbaclisters.ClusterRoleBindingLister

	queue workqueue.TypedRateLimitingInterface[olmKey]
	// planned is keyed by Subscription and touched only by the worker goroutine.
	planned map[olmKey]plannedInstall
}

// runOLMStandIn runs the OLM stand-in until ctx is done and then returns nil. Start it once the
// flavour's CRDs are established: subscriptions, installplans, clusterserviceversions, operatorgroups,
// packagemanifests and nodefeaturediscoveries must be served (catalogsources may be missing), and
// the CRDs of subscriptions, installplans, clusterserviceversions, operatorgroups and
// nodefeaturediscoveries need the status subresource, as OLM's own do. It needs a client allowed to
// grant any RBAC (cluster-admin). The hardware map is not used: OLM does not look at hardware.
//
// bundleCRDs returns the CRDs a package's bundle of a CSV version carries (nil: no bundle has CRDs):
// OLM applies a bundle's CRDs before its CSV, which is how the GPU operator's ClusterPolicy CRD gets
// onto an OpenShift cluster.
func Run(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, bundleCRDs func(pkg, version string) ([]*unstructured.Unstructured, error), logf func(string, ...any)) error {
	factory := informers.NewSharedInformerFactory(cs, 0)
	w := &watcher{dyn: dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)}
	o := newOLMStandIn(cs, dyn, factory, bundleCRDs, logf)
	if err := o.watchOLMObjects(ctx, w, dyn); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	for _, inf := range []cache.SharedIndexInformer{
		factory.Apps().V1().Deployments().Informer(),
		factory.Apps().V1().DaemonSets().Informer(),
		factory.Core().V1().ConfigMaps().Informer(),
		factory.Core().V1().ServiceAccounts().Informer(),
		factory.Rbac().V1().Roles().Informer(),
		factory.Rbac().V1().RoleBindings().Informer(),
		factory.Rbac().V1().ClusterRoles().Informer(),
		factory.Rbac().V1().ClusterRoleBindings().Informer(),
	} {
		w.watch(inf, o.enqueueOwners)
	}
	if w.err != nil {
		return w.err
	}
	return standin.RunController(ctx, "olm stand-in", []standin.InformerFactory{factory, w.dyn}, w.synced, o.queue, 1, o.reconcile, logf)
}

func newOLMStandIn(cs kubernetes.Interface, dyn dynamic.Interface, factory informers.SharedInformerFactory, bundleCRDs func(pkg, version string) ([]*unstructured.Unstructured, error), logf func(string, ...any)) *olmStandIn {
	return &olmStandIn{
		cs:                  cs,
		dyn:                 dyn,
		bundleCRDs:          bundleCRDs,
		logf:                logf,
		deployments:         factory.Apps().V1().Deployments().Lister(),
		daemonSets:          factory.Apps().V1().DaemonSets().Lister(),
		configMaps:          factory.Core().V1().ConfigMaps().Lister(),
		serviceAccounts:     factory.Core().V1().ServiceAccounts().Lister(),
		roles:               factory.Rbac().V1().Roles().Lister(),
		roleBindings:        factory.Rbac().V1().RoleBindings().Lister(),
		clusterRoles:        factory.Rbac().V1().ClusterRoles().Lister(),
		clusterRoleBindings: factory.Rbac().V1().ClusterRoleBindings().Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[olmKey](),
			workqueue.TypedRateLimitingQueueConfig[olmKey]{Name: "olm-stand-in"}),
		planned: map[olmKey]plannedInstall{},
	}
}

// watcher registers event handlers and collects what RunController waits for; the first error
// is kept.
type watcher struct {
	dyn    dynamicinformer.DynamicSharedInformerFactory
	synced []cache.InformerSynced
	err    error
}

func (w *watcher) watch(inf cache.SharedIndexInformer, fn func(obj any)) {
	reg, err := inf.AddEventHandler(standin.OnAnyChange(fn))
	if err != nil {
		if w.err == nil {
			w.err = fmt.Errorf("olm stand-in: watch: %w", err)
		}
		return
	}
	w.synced = append(w.synced, reg.HasSynced)
}

func (w *watcher) dynWatch(gvr schema.GroupVersionResource, fn func(obj any)) cache.GenericLister {
	inf := w.dyn.ForResource(gvr)
	w.watch(inf.Informer(), fn)
	return inf.Lister()
}

// watchOLMObjects watches OLM's own resources (and the NFD Operator's), each change enqueueing what
// it affects. CatalogSources are watched only where the API serves them.
func (o *olmStandIn) watchOLMObjects(ctx context.Context, w *watcher, dyn dynamic.Interface) error {
	o.subs = w.dynWatch(SubscriptionsGVR, func(obj any) { o.enqueue(olmKindSub, obj) })
	o.plans = w.dynWatch(olmInstallPlansGVR, func(obj any) {
		o.enqueue(olmKindPlan, obj)
		o.enqueueOwners(obj)
	})
	o.csvs = w.dynWatch(CSVsGVR, func(obj any) {
		o.enqueue(olmKindCSV, obj)
		if m, err := meta.Accessor(obj); err == nil {
			o.enqueueNamespace(olmKindSub, o.subs, m.GetNamespace())
			o.enqueueNamespace(nfdKindOpenShift, o.nfds, m.GetNamespace())
		}
	})
	o.groups = w.dynWatch(OperatorGroupsGVR, func(obj any) {
		o.enqueue(olmKindGroup, obj)
		if m, err := meta.Accessor(obj); err == nil {
			o.enqueueNamespace(olmKindPlan, o.plans, m.GetNamespace())
		}
	})
	o.packages = w.dynWatch(PackageManifestsGVR, func(any) { o.enqueueNamespace(olmKindSub, o.subs, "") })
	o.nfds = w.dynWatch(nfdOpenShiftGVR, func(obj any) { o.enqueue(nfdKindOpenShift, obj) })
	if _, err := dyn.Resource(olmCatalogSourcesGVR).List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
		o.catalogs = w.dynWatch(olmCatalogSourcesGVR, func(any) { o.enqueueNamespace(olmKindSub, o.subs, "") })
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("olm stand-in: list catalogsources: %w", err)
	}
	return nil
}

func (o *olmStandIn) enqueue(kind string, obj any) {
	if m, err := meta.Accessor(obj); err == nil {
		o.queue.Add(olmKey{kind: kind, namespace: m.GetNamespace(), name: m.GetName()})
	}
}

// enqueueNamespace queues every object of lister in namespace ns ("" for all namespaces).
func (o *olmStandIn) enqueueNamespace(kind string, lister cache.GenericLister, ns string) {
	if lister == nil {
		return
	}
	var objs []runtime.Object
	var err error
	if ns == "" {
		objs, err = lister.List(labels.Everything())
	} else {
		objs, err = lister.ByNamespace(ns).List(labels.Everything())
	}
	if err != nil {
		return
	}
	for _, obj := range objs {
		o.enqueue(kind, obj)
	}
}

// enqueueOwners queues the Subscription that owns an InstallPlan, the CSV that owns an object OLM
// created (by its olm.owner labels, which cluster-scoped objects need since they cannot carry an owner
// reference to a namespaced CSV) and the NodeFeatureDiscovery that owns an NFD operand.
func (o *olmStandIn) enqueueOwners(obj any) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	l := m.GetLabels()
	if l[olmOwnerKindLabel] == olmKindCSV && l[olmOwnerLabel] != "" {
		o.queue.Add(olmKey{kind: olmKindCSV, namespace: l[olmOwnerNSLabel], name: l[olmOwnerLabel]})
	}
	for _, ref := range m.GetOwnerReferences() {
		switch {
		case ref.Kind == olmKindSub && ref.APIVersion == olmAPIVersion:
			o.queue.Add(olmKey{kind: olmKindSub, namespace: m.GetNamespace(), name: ref.Name})
		case ref.Kind == nfdKindOpenShift && ref.APIVersion == nfdOpenShiftAPI:
			o.queue.Add(olmKey{kind: nfdKindOpenShift, namespace: m.GetNamespace(), name: ref.Name})
		}
	}
}

func (o *olmStandIn) reconcile(ctx context.Context, k olmKey) error {
	switch k.kind {
	case olmKindSub:
		return o.syncSubscription(ctx, k)
	case olmKindPlan:
		return o.syncInstallPlan(ctx, k)
	case olmKindCSV:
		return o.syncCSV(ctx, k)
	case olmKindGroup:
		return o.syncOperatorGroup(ctx, k)
	case nfdKindOpenShift:
		return o.syncNodeFeatureDiscovery(ctx, k)
	}
	return nil
}

// olmGet returns the object namespace/name from lister, or nil if it does not exist.
func olmGet(lister cache.GenericLister, namespace, name string) (*unstructured.Unstructured, error) {
	obj, err := lister.ByNamespace(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("%s/%s: unexpected type %T", namespace, name, obj)
	}
	return u, nil
}

// olmList returns the objects of lister in namespace ("" for all).
func olmList(lister cache.GenericLister, namespace string) []*unstructured.Unstructured {
	var objs []runtime.Object
	if namespace == "" {
		objs, _ = lister.List(labels.Everything())
	} else {
		objs, _ = lister.ByNamespace(namespace).List(labels.Everything())
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, obj := range objs {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
	}
	return out
}

// olmField is the string at fields in u, or "".
func olmField(u map[string]any, fields ...string) string {
	s, _, _ := unstructured.NestedString(u, fields...)
	return s
}

func olmTimestamp() string { return time.Now().UTC().Format(time.RFC3339) }

// olmSetCondition sets the condition of type typ in conds (a status.conditions list), keeping its
// lastTransitionTime while its status does not change.
func olmSetCondition(conds []any, typ, status, reason, message string) []any {
	now := olmTimestamp()
	c := map[string]any{"type": typ, "status": status, "lastTransitionTime": now}
	if reason != "" {
		c["reason"] = reason
	}
	if message != "" {
		c["message"] = message
	}
	out := make([]any, 0, len(conds)+1)
	found := false
	for _, old := range conds {
		m, ok := old.(map[string]any)
		if !ok || m["type"] != typ {
			out = append(out, old)
			continue
		}
		found = true
		if m["status"] == status && m["lastTransitionTime"] != nil {
			c["lastTransitionTime"] = m["lastTransitionTime"]
		}
		out = append(out, c)
	}
	if !found {
		out = append(out, c)
	}
	return out
}

func olmRemoveCondition(conds []any, typ string) []any {
	return slices.DeleteFunc(slices.Clone(conds), func(c any) bool {
		m, ok := c.(map[string]any)
		return ok && m["type"] == typ
	})
}

// writeStatus replaces u's status with status through the status subresource unless nothing but the
// timestamp field stamp (if any) would change.
func (o *olmStandIn) writeStatus(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured, status map[string]any, stamp string) error {
	old, _, _ := unstructured.NestedMap(u.Object, "status")
	if stamp != "" {
		if v, ok := old[stamp]; ok {
			status[stamp] = v
		} else {
			delete(status, stamp)
		}
	}
	if apiequality.Semantic.DeepEqual(old, status) {
		return nil
	}
	if stamp != "" {
		status[stamp] = olmTimestamp()
	}
	updated := u.DeepCopy()
	updated.Object["status"] = status
	if _, err := o.dyn.Resource(gvr).Namespace(u.GetNamespace()).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update status of %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// olmResolution is what a Subscription resolves to in its catalog.
type olmResolution struct {
	pkg, source, sourceNamespace string
	catalogMissing               bool
	// failure is the ResolutionFailed message; empty when resolution succeeded.
	failure string
	csv     string
	version string
	// desc is the channel's currentCSVDesc: displayName, version, annotations (alm-examples), ….
	desc map[string]any
}

func (o *olmStandIn) catalogExists(name, namespace string) bool {
	if o.catalogs != nil {
		if cat, _ := olmGet(o.catalogs, namespace, name); cat != nil {
			return true
		}
	}
	return o.findPackage("", name, namespace) != nil
}

// findPackage returns the PackageManifest of package pkg (any package if pkg is "") from catalog
// source in namespace sourceNS. Real PackageManifests are served in every namespace by OLM's
// package server; the flavour stores them in the catalog's namespace, so both the object's namespace
// and status.catalogSourceNamespace count.
func (o *olmStandIn) findPackage(pkg, source, sourceNS string) *unstructured.Unstructured {
	for _, pm := range olmList(o.packages, "") {
		name := olmField(pm.Object, "status", "packageName")
		if name == "" {
			name = pm.GetName()
		}
		catNS := olmField(pm.Object, "status", "catalogSourceNamespace")
		if catNS == "" {
			catNS = pm.GetNamespace()
		}
		if (pkg == "" || name == pkg) && catNS == sourceNS && olmField(pm.Object, "status", "catalogSource") == source {
			return pm
		}
	}
	return nil
}

// resolve finds what sub installs. Messages follow OLM v0's resolver ("constraints not satisfiable:
// …"), which the research's OpenShift section and OLM's own tests show.
func (o *olmStandIn) resolve(sub *unstructured.Unstructured) olmResolution {
	r := olmResolution{
		pkg:             olmField(sub.Object, "spec", "name"),
		source:          olmField(sub.Object, "spec", "source"),
		sourceNamespace: olmField(sub.Object, "spec", "sourceNamespace"),
	}
	name := sub.GetName()
	r.catalogMissing = !o.catalogExists(r.source, r.sourceNamespace)
	pm := o.findPackage(r.pkg, r.source, r.sourceNamespace)
	if pm == nil {
		if r.catalogMissing {
			r.failure = fmt.Sprintf("constraints not satisfiable: no operators found from catalog %s in namespace %s referenced by subscription %s, subscription %s exists",
				r.source, r.sourceNamespace, name, name)
		} else {
			r.failure = fmt.Sprintf("constraints not satisfiable: no operators found in package %s in the catalog referenced by subscription %s, subscription %s exists",
				r.pkg, name, name)
		}
		return r
	}
	channel := olmField(sub.Object, "spec", "channel")
	if channel == "" {
		channel = olmField(pm.Object, "status", "defaultChannel")
	}
	channels, _, _ := unstructured.NestedSlice(pm.Object, "status", "channels")
	var ch map[string]any
	for _, c := range channels {
		if m, ok := c.(map[string]any); ok && m["name"] == channel {
			ch = m
		}
	}
	if ch == nil {
		r.failure = fmt.Sprintf("constraints not satisfiable: no operators found in channel %s of package %s in the catalog referenced by subscription %s, subscription %s exists",
			channel, r.pkg, name, name)
		return r
	}
	r.csv = olmField(ch, "currentCSV")
	r.desc, _, _ = unstructured.NestedMap(ch, "currentCSVDesc")
	r.version = olmField(r.desc, "version")
	if start := olmField(sub.Object, "spec", "startingCSV"); start != "" && start != r.csv {
		entries, _, _ := unstructured.NestedSlice(ch, "entries")
		found := false
		for _, e := range entries {
			if m, ok := e.(map[string]any); ok && m["name"] == start {
				r.csv, r.version, found = start, olmField(m, "version"), true
			}
		}
		if !found {
			r.failure = fmt.Sprintf("constraints not satisfiable: no operators found with name %s in channel %s of package %s in the catalog referenced by subscription %s, subscription %s exists",
				start, channel, r.pkg, name, name)
		}
	}
	if r.version == "" {
		// Bundle names are <package>.v<version> by convention.
		if _, v, ok := strings.Cut(r.csv, ".v"); ok {
			r.version = v
		}
	}
	return r
}

func (o *olmStandIn) syncSubscription(ctx context.Context, k olmKey) error {
	sub, err := olmGet(o.subs, k.namespace, k.name)
	if err != nil {
		return err
	}
	if sub == nil {
		delete(o.planned, k) // the CSV stays, as with OLM
		return nil
	}
	r := o.resolve(sub)
	status, _, _ := unstructured.NestedMap(sub.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	conds, _, _ := unstructured.NestedSlice(sub.Object, "status", "conditions")
	if r.catalogMissing {
		conds = olmSetCondition(conds, "CatalogSourcesUnhealthy", "True", "UnhealthyCatalogSourceFound",
			fmt.Sprintf("targeted catalogsource %s/%s missing", r.sourceNamespace, r.source))
	} else {
		conds = olmSetCondition(conds, "CatalogSourcesUnhealthy", "False", "AllCatalogSourcesHealthy", "all available catalogsources are healthy")
	}
	if r.failure != "" {
		status["conditions"] = olmSetCondition(conds, "ResolutionFailed", "True", "ConstraintsNotSatisfiable", r.failure)
		return o.writeStatus(ctx, SubscriptionsGVR, sub, status, "lastUpdated")
	}
	conds = olmRemoveCondition(conds, "ResolutionFailed")

	csv, err := olmGet(o.csvs, sub.GetNamespace(), r.csv)
	if err != nil {
		return err
	}
	if csv == nil { // the cache may be behind a plan that just completed
		csv, err = o.dyn.Resource(CSVsGVR).Namespace(sub.GetNamespace()).Get(ctx, r.csv, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			csv, err = nil, nil
		}
		if err != nil {
			return err
		}
	}
	plan, err := o.planFor(ctx, k, sub, r.csv, csv != nil)
	if err != nil {
		return err
	}
	if plan == nil && csv == nil {
		if plan, err = o.createInstallPlan(ctx, k, sub, r); err != nil {
			return err
		}
	}
	if plan != nil {
		if olmField(plan.Object, "status", "phase") == "" {
			if plan, err = o.initInstallPlanStatus(ctx, plan, sub, r); err != nil {
				return err
			}
		}
		status["installPlanRef"] = map[string]any{
			"apiVersion": olmAPIVersion, "kind": olmKindPlan,
			"name": plan.GetName(), "namespace": plan.GetNamespace(), "uid": string(plan.GetUID()),
		}
		status["installplan"] = map[string]any{
			"apiVersion": olmAPIVersion, "kind": olmKindPlan, "name": plan.GetName(), "uuid": string(plan.GetUID()),
		}
		status["installPlanGeneration"] = int64(1)
	}
	status["currentCSV"] = r.csv
	if csv != nil {
		status["installedCSV"] = r.csv
		status["state"] = "AtLatestKnown"
		conds = olmRemoveCondition(conds, "InstallPlanPending")
	} else {
		status["state"] = "UpgradePending"
		reason := "Installing"
		if plan != nil && olmField(plan.Object, "status", "phase") == "RequiresApproval" {
			reason = "RequiresApproval"
		}
		conds = olmSetCondition(conds, "InstallPlanPending", "True", reason, "")
	}
	status["conditions"] = conds
	return o.writeStatus(ctx, SubscriptionsGVR, sub, status, "lastUpdated")
}

// planFor finds the InstallPlan already made for sub to install csv: the one this stand-in created
// last, the one its status references, or one it owns. A completed plan whose CSV has been deleted
// does not count: OLM installs the CSV again while the Subscription exists.
func (o *olmStandIn) planFor(ctx context.Context, k olmKey, sub *unstructured.Unstructured, csv string, installed bool) (*unstructured.Unstructured, error) {
	usable := func(plan *unstructured.Unstructured) bool {
		return planInstalls(plan, csv) && (installed || olmField(plan.Object, "status", "phase") != "Complete")
	}
	var names []string
	if p, ok := o.planned[k]; ok && p.subUID == string(sub.GetUID()) {
		names = append(names, p.plan)
	}
	if n := olmField(sub.Object, "status", "installPlanRef", "name"); n != "" {
		names = append(names, n)
	}
	for _, n := range names {
		plan, err := olmGet(o.plans, sub.GetNamespace(), n)
		if err != nil {
			return nil, err
		}
		if plan == nil { // perhaps too new for the cache
			plan, err = o.dyn.Resource(olmInstallPlansGVR).Namespace(sub.GetNamespace()).Get(ctx, n, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
		}
		if usable(plan) {
			return plan, nil
		}
	}
	for _, plan := range olmList(o.plans, sub.GetNamespace()) {
		for _, ref := range plan.GetOwnerReferences() {
			if ref.UID == sub.GetUID() && usable(plan) {
				return plan, nil
			}
		}
	}
	return nil, nil
}

func planInstalls(plan *unstructured.Unstructured, csv string) bool {
	names, _, _ := unstructured.NestedStringSlice(plan.Object, "spec", "clusterServiceVersionNames")
	return slices.Contains(names, csv)
}

func olmPackageLabel(pkg, namespace string) string {
	return fmt.Sprintf(olmPackageLabelFmt, pkg, namespace)
}

// createInstallPlan creates the InstallPlan for r. Names are generated here, like the API server's
// generateName would (install-xxxxx), because fake clients do not generate names.
func (o *olmStandIn) createInstallPlan(ctx context.Context, k olmKey, sub *unstructured.Unstructured, r olmResolution) (*unstructured.Unstructured, error) {
	approval := olmField(sub.Object, "spec", "installPlanApproval")
	if approval == "" {
		approval = "Automatic"
	}
	for range 5 {
		plan := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": olmAPIVersion,
			"kind":       olmKindPlan,
			"metadata": map[string]any{
				"name":         "install-" + utilrand.String(5),
				"generateName": "install-",
				"namespace":    sub.GetNamespace(),
				"labels":       map[string]any{olmPackageLabel(r.pkg, sub.GetNamespace()): ""},
				"ownerReferences": []any{map[string]any{
					"apiVersion": olmAPIVersion, "kind": olmKindSub, "name": sub.GetName(), "uid": string(sub.GetUID()),
					"controller": false, "blockOwnerDeletion": false,
				}},
			},
			"spec": map[string]any{
				"approval":                   approval,
				"approved":                   approval == "Automatic",
				"clusterServiceVersionNames": []any{r.csv},
				"generation":                 int64(1),
			},
		}}
		created, err := o.dyn.Resource(olmInstallPlansGVR).Namespace(sub.GetNamespace()).Create(ctx, plan, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("create InstallPlan for subscription %s/%s: %w", sub.GetNamespace(), sub.GetName(), err)
		}
		o.planned[k] = plannedInstall{subUID: string(sub.GetUID()), plan: created.GetName()}
		o.logf("olm stand-in: subscription %s/%s: InstallPlan %s for %s (approval %s)", sub.GetNamespace(), sub.GetName(), created.GetName(), r.csv, approval)
		return created, nil
	}
	return nil, fmt.Errorf("create InstallPlan for subscription %s/%s: no free name", sub.GetNamespace(), sub.GetName())
}

// initInstallPlanStatus writes a new plan's status: its phase and its one step, the CSV manifest.
func (o *olmStandIn) initInstallPlanStatus(ctx context.Context, plan, sub *unstructured.Unstructured, r olmResolution) (*unstructured.Unstructured, error) {
	csv, err := buildCSV(sub.GetNamespace(), r)
	if err != nil {
		return nil, err
	}
	manifest, err := json.Marshal(csv.Object)
	if err != nil {
		return nil, err
	}
	phase := "Installing"
	if approved, _, _ := unstructured.NestedBool(plan.Object, "spec", "approved"); !approved {
		phase = "RequiresApproval"
	}
	updated := plan.DeepCopy()
	updated.Object["status"] = map[string]any{
		"phase":          phase,
		"catalogSources": []any{r.source},
		"plan": []any{map[string]any{
			"resolving": r.csv,
			"resource": map[string]any{
				"group": "operators.coreos.com", "version": "v1alpha1", "kind": olmKindCSV, "name": r.csv,
				"sourceName": r.source, "sourceNamespace": r.sourceNamespace, "manifest": string(manifest),
			},
			"status": "Unknown",
		}},
	}
	out, err := o.dyn.Resource(olmInstallPlansGVR).Namespace(plan.GetNamespace()).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update status of InstallPlan %s/%s: %w", plan.GetNamespace(), plan.GetName(), err)
	}
	return out, nil
}

// buildCSV is the ClusterServiceVersion a bundle in the catalog would contain: the channel head's
// annotations (alm-examples, …), display name and version from the PackageManifest, and the install
// strategy the stand-in knows for the package.
func buildCSV(namespace string, r olmResolution) (*unstructured.Unstructured, error) {
	strategy, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ptr.To(olmBundleStrategy(r.pkg, r.version)))
	if err != nil {
		return nil, fmt.Errorf("install strategy of %s: %w", r.csv, err)
	}
	annotations := map[string]any{}
	if a, ok := r.desc["annotations"].(map[string]any); ok {
		annotations = a
	}
	displayName := olmField(r.desc, "displayName")
	if displayName == "" {
		displayName = r.pkg
	}
	spec := map[string]any{
		"displayName": displayName,
		"version":     r.version,
		"install":     map[string]any{"strategy": "deployment", "spec": strategy},
	}
	for _, f := range []string{"provider", "installModes", "description"} {
		if v, ok := r.desc[f]; ok {
			spec[f] = v
		}
	}
	return &unstructured.Unstructured{Object: runtime.DeepCopyJSON(map[string]any{
		"apiVersion": olmAPIVersion,
		"kind":       olmKindCSV,
		"metadata": map[string]any{
			"name":        r.csv,
			"namespace":   namespace,
			"labels":      map[string]any{olmPackageLabel(r.pkg, namespace): ""},
			"annotations": annotations,
		},
		"spec": spec,
	})}, nil
}

func (o *olmStandIn) syncInstallPlan(ctx context.Context, k olmKey) error {
	plan, err := olmGet(o.plans, k.namespace, k.name)
	if err != nil || plan == nil {
		return err
	}
	phase := olmField(plan.Object, "status", "phase")
	if phase == "" || phase == "Complete" || phase == "Failed" {
		return nil // a new plan's status is written by its Subscription's reconcile
	}
	status, _, _ := unstructured.NestedMap(plan.Object, "status")
	if approved, _, _ := unstructured.NestedBool(plan.Object, "spec", "approved"); !approved {
		status["phase"] = "RequiresApproval"
		return o.writeStatus(ctx, olmInstallPlansGVR, plan, status, "")
	}
	groups := olmList(o.groups, plan.GetNamespace())
	if len(groups) != 1 {
		msg := olmNoGroupMessage
		if len(groups) > 1 {
			msg = fmt.Sprintf("more than one operator group(s) are managing this namespace count=%d", len(groups))
		}
		status["phase"] = "Installing"
		conds, _ := status["conditions"].([]any)
		status["conditions"] = olmSetCondition(conds, "Installed", "False", olmInstallCheckErr, msg)
		return o.writeStatus(ctx, olmInstallPlansGVR, plan, status, "")
	}
	group := groups[0]
	steps, _ := status["plan"].([]any)
	for _, s := range steps {
		step, ok := s.(map[string]any)
		if !ok || step["status"] == "Created" || olmField(step, "resource", "kind") != olmKindCSV {
			continue
		}
		csv := &unstructured.Unstructured{}
		if err := csv.UnmarshalJSON([]byte(olmField(step, "resource", "manifest"))); err != nil {
			return fmt.Errorf("InstallPlan %s/%s: step %s: %w", plan.GetNamespace(), plan.GetName(), olmField(step, "resolving"), err)
		}
		csv.SetNamespace(plan.GetNamespace())
		// An upgrade: the Subscription has a CSV installed already, which this one replaces.
		if installed := o.installedCSVOf(plan); installed != "" && installed != csv.GetName() {
			if err := unstructured.SetNestedField(csv.Object, installed, "spec", "replaces"); err != nil {
				return err
			}
		}
		ann := csv.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann["olm.operatorGroup"] = group.GetName()
		ann["olm.operatorNamespace"] = group.GetNamespace()
		ann["olm.targetNamespaces"] = strings.Join(groupTargets(group), ",")
		csv.SetAnnotations(ann)
		_, err := o.dyn.Resource(CSVsGVR).Namespace(plan.GetNamespace()).Create(ctx, csv, metav1.CreateOptions{})
		switch {
		case err == nil:
			o.logf("olm stand-in: InstallPlan %s/%s: created ClusterServiceVersion %s", plan.GetNamespace(), plan.GetName(), csv.GetName())
		case !apierrors.IsAlreadyExists(err): // already there: an earlier pass created it
			return fmt.Errorf("InstallPlan %s/%s: create ClusterServiceVersion %s: %w", plan.GetNamespace(), plan.GetName(), csv.GetName(), err)
		}
		step["status"] = "Created"
	}
	status["phase"] = "Complete"
	conds, _ := status["conditions"].([]any)
	status["conditions"] = olmSetCondition(conds, "Installed", "True", "", "")
	return o.writeStatus(ctx, olmInstallPlansGVR, plan, status, "")
}

// installedCSVOf is the installed CSV of the Subscription that owns an InstallPlan ("" if none).
func (o *olmStandIn) installedCSVOf(plan *unstructured.Unstructured) string {
	for _, ref := range plan.GetOwnerReferences() {
		if ref.Kind != olmKindSub {
			continue
		}
		if sub, err := olmGet(o.subs, plan.GetNamespace(), ref.Name); err == nil && sub != nil {
			return olmField(sub.Object, "status", "installedCSV")
		}
	}
	return ""
}

// groupTargets is the namespaces an OperatorGroup targets: spec.targetNamespaces, or all namespaces
// ("") without them. Selectors are not evaluated.
func groupTargets(group *unstructured.Unstructured) []string {
	targets, _, _ := unstructured.NestedStringSlice(group.Object, "spec", "targetNamespaces")
	if len(targets) == 0 {
		return []string{""}
	}
	return slices.Sorted(slices.Values(targets))
}

func (o *olmStandIn) syncOperatorGroup(ctx context.Context, k olmKey) error {
	group, err := olmGet(o.groups, k.namespace, k.name)
	if err != nil || group == nil {
		return err
	}
	status, _, _ := unstructured.NestedMap(group.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	var ns []any
	for _, t := range groupTargets(group) {
		ns = append(ns, t)
	}
	status["namespaces"] = ns
	return o.writeStatus(ctx, OperatorGroupsGVR, group, status, "lastUpdated")
}

// olmStrategy is the deployment install strategy of a ClusterServiceVersion (spec.install.spec), the
// part OLM v0 acts on.
type olmStrategy struct {
	Deployments        []olmStrategyDeployment `json:"deployments,omitempty"`
	Permissions        []olmPermission         `json:"permissions,omitempty"`
	ClusterPermissions []olmPermission         `json:"clusterPermissions,omitempty"`
}

type olmStrategyDeployment struct {
	Name  string                `json:"name"`
	Label map[string]string     `json:"label,omitempty"`
	Spec  appsv1.DeploymentSpec `json:"spec"`
}

type olmPermission struct {
	ServiceAccountName string              `json:"serviceAccountName"`
	Rules              []rbacv1.PolicyRule `json:"rules"`
}

func csvStrategy(csv *unstructured.Unstructured) (olmStrategy, error) {
	var s olmStrategy
	spec, found, err := unstructured.NestedMap(csv.Object, "spec", "install", "spec")
	if err != nil || !found {
		return s, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &s); err != nil {
		return s, fmt.Errorf("install strategy of %s: %w", csv.GetName(), err)
	}
	return s, nil
}

func (o *olmStandIn) syncCSV(ctx context.Context, k olmKey) error {
	csv, err := olmGet(o.csvs, k.namespace, k.name)
	if err != nil {
		return err
	}
	if csv == nil {
		return o.deleteClusterScoped(ctx, k)
	}
	strategy, err := csvStrategy(csv)
	if err != nil {
		if olmField(csv.Object, "status", "phase") == "Failed" {
			return nil
		}
		return o.setCSVPhase(ctx, csv, "Failed", "InvalidInstallStrategy", err.Error())
	}
	switch phase := olmField(csv.Object, "status", "phase"); phase {
	case "":
		return o.setCSVPhase(ctx, csv, "Pending", "RequirementsUnknown", "requirements not yet checked")
	case "Pending":
		return o.setCSVPhase(ctx, csv, "InstallReady", "AllRequirementsMet", "all requirements found, attempting install")
	case "InstallReady":
		if err := o.ensureCSVObjects(ctx, csv, strategy); err != nil {
			return err
		}
		return o.setCSVPhase(ctx, csv, "Installing", "InstallSucceeded", "waiting for install components to report healthy")
	case "Installing", "Succeeded":
		if err := o.ensureCSVObjects(ctx, csv, strategy); err != nil {
			return err
		}
		waiting := ""
		for _, d := range strategy.Deployments {
			if dep, err := o.deployments.Deployments(csv.GetNamespace()).Get(d.Name); err != nil || !olmDeploymentReady(dep) {
				waiting = d.Name
				break
			}
		}
		switch {
		case waiting == "" && phase != "Succeeded":
			o.logf("olm stand-in: ClusterServiceVersion %s/%s succeeded", csv.GetNamespace(), csv.GetName())
			return o.setCSVPhase(ctx, csv, "Succeeded", "InstallSucceeded", "install strategy completed with no errors")
		case waiting == "" && phase == "Succeeded":
			// The CSV this one replaces goes once this one has succeeded, as OLM's Replacing and
			// Deleting phases end.
			if old := olmField(csv.Object, "spec", "replaces"); old != "" {
				err := o.dyn.Resource(CSVsGVR).Namespace(csv.GetNamespace()).Delete(ctx, old, metav1.DeleteOptions{})
				switch {
				case err == nil:
					o.logf("olm stand-in: ClusterServiceVersion %s/%s replaced %s: deleted it", csv.GetNamespace(), csv.GetName(), old)
				case !apierrors.IsNotFound(err):
					return fmt.Errorf("delete replaced ClusterServiceVersion %s/%s: %w", csv.GetNamespace(), old, err)
				}
			}
		case waiting != "" && phase == "Installing":
			msg := fmt.Sprintf("installing: waiting for deployment %s to become ready: deployment %q not available: Deployment does not have minimum availability.", waiting, waiting)
			if olmField(csv.Object, "status", "message") != msg {
				return o.setCSVPhase(ctx, csv, "Installing", "InstallWaiting", msg)
			}
		}
	}
	return nil
}

// olmDeploymentReady is OLM's own check of a CSV's Deployment before the CSV succeeds
// (operator-framework/operator-lifecycle-manager pkg/controller/install/status_viewer.go, DeploymentStatus,
// at commit a326d83): the deployment controller has observed the current spec, no outdated replica is
// left, and the Available condition is True. It is looser than gpuctl's health.DeploymentAvailable (it
// does not count updated or available replicas, and calls a Deployment scaled to zero ready), which is
// why the stand-in keeps its own. OLM fails the CSV on a rollout past its progress deadline; the
// stand-in keeps waiting.
func olmDeploymentReady(d *appsv1.Deployment) bool {
	if d.Generation > d.Status.ObservedGeneration || d.Status.Replicas > d.Status.UpdatedReplicas {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// setCSVPhase moves a CSV to phase, appending to status.conditions as OLM keeps a history there.
func (o *olmStandIn) setCSVPhase(ctx context.Context, csv *unstructured.Unstructured, phase, reason, message string) error {
	status, _, _ := unstructured.NestedMap(csv.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	now := olmTimestamp()
	if status["phase"] != phase {
		status["lastTransitionTime"] = now
	}
	status["phase"], status["reason"], status["message"], status["lastUpdateTime"] = phase, reason, message, now
	conds, _ := status["conditions"].([]any)
	status["conditions"] = append(conds, map[string]any{
		"phase": phase, "reason": reason, "message": message, "lastTransitionTime": now, "lastUpdateTime": now,
	})
	updated := csv.DeepCopy()
	updated.Object["status"] = status
	if _, err := o.dyn.Resource(CSVsGVR).Namespace(csv.GetNamespace()).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update status of ClusterServiceVersion %s/%s: %w", csv.GetNamespace(), csv.GetName(), err)
	}
	return nil
}

// csvOwnerLabels are the labels OLM puts on what it creates for a CSV, which tie cluster-scoped
// objects to it.
func csvOwnerLabels(csv *unstructured.Unstructured) map[string]string {
	l := map[string]string{
		olmOwnerLabel:     csv.GetName(),
		olmOwnerKindLabel: olmKindCSV,
		olmOwnerNSLabel:   csv.GetNamespace(),
	}
	for k, v := range csv.GetLabels() {
		if strings.HasPrefix(k, "operators.coreos.com/") {
			l[k] = v
		}
	}
	return l
}

func csvRBACName(csv, serviceAccount string) string { return csv + "-" + serviceAccount }

// ensureCSVObjects creates what the CSV's strategy declares and does not exist yet. Namespaced objects
// are owned by the CSV; cluster-scoped ones carry its olm.owner labels only.
func (o *olmStandIn) ensureCSVObjects(ctx context.Context, csv *unstructured.Unstructured, s olmStrategy) error {
	if err := o.ensureBundleCRDs(ctx, csv); err != nil {
		return err
	}
	in := newCSVInstall(csv)
	if err := o.ensureServiceAccounts(ctx, in, s); err != nil {
		return err
	}
	if err := o.ensureRoles(ctx, in, s); err != nil {
		return err
	}
	if err := o.ensureClusterRoles(ctx, in, s); err != nil {
		return err
	}
	return o.ensureDeployments(ctx, in, s)
}

// csvInstall is what every object a ClusterServiceVersion installs shares: its namespace, its owner
// reference to the CSV, and the CSV it replaces ("" for a first install).
type csvInstall struct {
	csv          *unstructured.Unstructured
	ns, replaces string
	owner        []metav1.OwnerReference
}

func newCSVInstall(csv *unstructured.Unstructured) csvInstall {
	return csvInstall{
		csv: csv, ns: csv.GetNamespace(), replaces: olmField(csv.Object, "spec", "replaces"),
		owner: []metav1.OwnerReference{{
			APIVersion: olmAPIVersion, Kind: olmKindCSV, Name: csv.GetName(), UID: csv.GetUID(),
			Controller: ptr.To(false), BlockOwnerDeletion: ptr.To(false),
		}},
	}
}

// meta is the metadata of an object the CSV installs: labelled with the CSV's owner labels and, when
// namespaced, owned by the CSV.
func (in csvInstall) meta(name string, namespaced bool) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Labels: csvOwnerLabels(in.csv)}
	if namespaced {
		m.Namespace, m.OwnerReferences = in.ns, in.owner
	}
	return m
}

// ensureBundleCRDs creates the bundle's CRDs, or on an upgrade updates them to the new bundle's.
func (o *olmStandIn) ensureBundleCRDs(ctx context.Context, csv *unstructured.Unstructured) error {
	pkg, _, _ := strings.Cut(csv.GetName(), ".")
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	var crds []*unstructured.Unstructured
	if o.bundleCRDs != nil {
		var err error
		if crds, err = o.bundleCRDs(pkg, olmField(csv.Object, "spec", "version")); err != nil {
			return fmt.Errorf("bundle CRDs of %s: %w", csv.GetName(), err)
		}
	}
	replaces := olmField(csv.Object, "spec", "replaces")
	for _, crd := range crds {
		_, err := o.dyn.Resource(crdGVR).Create(ctx, crd.DeepCopy(), metav1.CreateOptions{FieldManager: "catalog-operator"})
		if apierrors.IsAlreadyExists(err) && replaces != "" {
			// An upgrade: OLM updates the bundle's CRDs to the new bundle's.
			err = o.updateCRD(ctx, crdGVR, crd)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("bundle CRD %s: %w", crd.GetName(), err)
		}
	}
	return nil
}

// ensureServiceAccounts creates the service accounts the strategy's permissions and Deployments name,
// and takes over those of the CSV it replaces.
func (o *olmStandIn) ensureServiceAccounts(ctx context.Context, in csvInstall, s olmStrategy) error {
	csv, ns, replaces, owner, objMeta := in.csv, in.ns, in.replaces, in.owner, in.meta
	accounts := map[string]bool{}
	for _, p := range slices.Concat(s.Permissions, s.ClusterPermissions) {
		accounts[p.ServiceAccountName] = true
	}
	for _, d := range s.Deployments {
		if sa := d.Spec.Template.Spec.ServiceAccountName; sa != "" {
			accounts[sa] = true
		}
	}
	for _, sa := range slices.Sorted(maps.Keys(accounts)) {
		if have, err := o.serviceAccounts.ServiceAccounts(ns).Get(sa); err == nil {
			if replaces != "" && ownedBy(have.OwnerReferences, replaces) {
				// The new CSV takes over what the replaced one owned, or garbage collection would
				// take it with the replaced CSV.
				upd := have.DeepCopy()
				upd.OwnerReferences, upd.Labels = owner, csvOwnerLabels(csv)
				if _, err := o.cs.CoreV1().ServiceAccounts(ns).Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
					return fmt.Errorf("take over service account %s/%s: %w", ns, sa, err)
				}
			}
			continue
		}
		if err := ignoreExists(o.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: objMeta(sa, true)}, metav1.CreateOptions{})); err != nil {
			return fmt.Errorf("create service account %s/%s: %w", ns, sa, err)
		}
	}
	return nil
}

// ensureRoles creates a Role and RoleBinding for each of the strategy's namespaced permissions.
func (o *olmStandIn) ensureRoles(ctx context.Context, in csvInstall, s olmStrategy) error {
	csv, ns, objMeta := in.csv, in.ns, in.meta
	for _, p := range s.Permissions {
		name := csvRBACName(csv.GetName(), p.ServiceAccountName)
		if _, err := o.roles.Roles(ns).Get(name); err != nil {
			if err := ignoreExists(o.cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: objMeta(name, true), Rules: p.Rules}, metav1.CreateOptions{})); err != nil {
				return fmt.Errorf("create role %s/%s: %w", ns, name, err)
			}
		}
		if _, err := o.roleBindings.RoleBindings(ns).Get(name); err != nil {
			rb := &rbacv1.RoleBinding{
				ObjectMeta: objMeta(name, true),
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: p.ServiceAccountName, Namespace: ns}},
			}
			if err := ignoreExists(o.cs.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{})); err != nil {
				return fmt.Errorf("create role binding %s/%s: %w", ns, name, err)
			}
		}
	}
	return nil
}

// ensureClusterRoles creates a ClusterRole and ClusterRoleBinding for each cluster permission.
func (o *olmStandIn) ensureClusterRoles(ctx context.Context, in csvInstall, s olmStrategy) error {
	csv, ns, objMeta := in.csv, in.ns, in.meta
	for _, p := range s.ClusterPermissions {
		name := csvRBACName(csv.GetName(), p.ServiceAccountName)
		if _, err := o.clusterRoles.Get(name); err != nil {
			if err := ignoreExists(o.cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: objMeta(name, false), Rules: p.Rules}, metav1.CreateOptions{})); err != nil {
				return fmt.Errorf("create cluster role %s: %w", name, err)
			}
		}
		if _, err := o.clusterRoleBindings.Get(name); err != nil {
			crb := &rbacv1.ClusterRoleBinding{
				ObjectMeta: objMeta(name, false),
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: p.ServiceAccountName, Namespace: ns}},
			}
			if err := ignoreExists(o.cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})); err != nil {
				return fmt.Errorf("create cluster role binding %s: %w", name, err)
			}
		}
	}
	return nil
}

// ensureDeployments creates the strategy's Deployments, or on an upgrade gives the replaced CSV's
// Deployments the new spec and owner.
func (o *olmStandIn) ensureDeployments(ctx context.Context, in csvInstall, s olmStrategy) error {
	csv, ns, replaces, objMeta := in.csv, in.ns, in.replaces, in.meta
	for _, d := range s.Deployments {
		have, err := o.deployments.Deployments(ns).Get(d.Name)
		if err == nil && !(replaces != "" && ownedBy(have.OwnerReferences, replaces)) {
			continue
		}
		dep := &appsv1.Deployment{ObjectMeta: objMeta(d.Name, true), Spec: *d.Spec.DeepCopy()}
		for k, v := range d.Label {
			dep.Labels[k] = v
		}
		// OLM passes the OperatorGroup's settings to the operator's pods as annotations.
		for _, a := range []string{"olm.operatorGroup", "olm.operatorNamespace", "olm.targetNamespaces"} {
			if v, ok := csv.GetAnnotations()[a]; ok {
				if dep.Spec.Template.Annotations == nil {
					dep.Spec.Template.Annotations = map[string]string{}
				}
				dep.Spec.Template.Annotations[a] = v
			}
		}
		if have != nil && err == nil {
			// An upgrade: the replaced CSV's Deployment gets the new CSV's spec and owner, and rolls
			// out a new pod, as OLM updates a Deployment of the same name.
			upd := have.DeepCopy()
			upd.OwnerReferences, upd.Labels, upd.Spec = dep.OwnerReferences, dep.Labels, dep.Spec
			if _, err := o.cs.AppsV1().Deployments(ns).Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update deployment %s/%s for %s: %w", ns, d.Name, csv.GetName(), err)
			}
			o.logf("olm stand-in: ClusterServiceVersion %s/%s replaces %s: updated deployment %s", ns, csv.GetName(), replaces, d.Name)
			continue
		}
		_, err = o.cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue // the cache is behind
		}
		if err != nil {
			return fmt.Errorf("create deployment %s/%s: %w", ns, d.Name, err)
		}
		o.logf("olm stand-in: ClusterServiceVersion %s/%s: created deployment %s", ns, csv.GetName(), d.Name)
	}
	return nil
}

// ownedBy reports whether refs name a ClusterServiceVersion of that name.
func ownedBy(refs []metav1.OwnerReference, csv string) bool {
	for _, r := range refs {
		if r.Kind == olmKindCSV && r.Name == csv {
			return true
		}
	}
	return false
}

// updateCRD replaces an existing CRD's spec with the bundle's.
func (o *olmStandIn) updateCRD(ctx context.Context, gvr schema.GroupVersionResource, crd *unstructured.Unstructured) error {
	have, err := o.dyn.Resource(gvr).Get(ctx, crd.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	upd := have.DeepCopy()
	upd.Object["spec"] = runtime.DeepCopyJSONValue(crd.Object["spec"])
	_, err = o.dyn.Resource(gvr).Update(ctx, upd, metav1.UpdateOptions{FieldManager: "catalog-operator"})
	return err
}

func ignoreExists[T any](_ T, err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// deleteClusterScoped removes the ClusterRoles and ClusterRoleBindings made for a deleted CSV; the
// garbage collector removes the namespaced objects it owned.
func (o *olmStandIn) deleteClusterScoped(ctx context.Context, k olmKey) error {
	sel := labels.SelectorFromSet(labels.Set{olmOwnerLabel: k.name, olmOwnerKindLabel: olmKindCSV, olmOwnerNSLabel: k.namespace})
	roles, err := o.clusterRoles.List(sel)
	if err != nil {
		return err
	}
	for _, r := range roles {
		if err := o.cs.RbacV1().ClusterRoles().Delete(ctx, r.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete cluster role %s: %w", r.Name, err)
		}
		o.logf("olm stand-in: ClusterServiceVersion %s/%s gone: deleted cluster role %s", k.namespace, k.name, r.Name)
	}
	bindings, err := o.clusterRoleBindings.List(sel)
	if err != nil {
		return err
	}
	for _, b := range bindings {
		if err := o.cs.RbacV1().ClusterRoleBindings().Delete(ctx, b.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete cluster role binding %s: %w", b.Name, err)
		}
	}
	return nil
}

// olmBundleStrategy is the install strategy of the bundles the stand-in knows, modelled on the real
// bundles; any other package installs nothing.
func olmBundleStrategy(pkg, version string) olmStrategy {
	// The stand-in grants everything: the real bundles list exact clusterPermissions (for the GPU
	// operator, the ClusterRole of NVIDIA/gpu-operator deployments/gpu-operator/templates/clusterrole.yaml@v26.7.0), which gpuctl does not author.
	everything := []rbacv1.PolicyRule{
		{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
		{NonResourceURLs: []string{"*"}, Verbs: []string{"*"}},
	}
	runAnywhere := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	switch pkg {
	case "gpu-operator-certified":
		return gpuOperatorBundleStrategy(version, everything, runAnywhere)
	case "nfd":
		return nfdOperatorBundleStrategy(version, everything, runAnywhere)
	}
	return olmStrategy{}
}

// gpuOperatorBundleStrategy follows bundle/<version>/manifests/gpu-operator-certified.clusterserviceversion.yaml
// of NVIDIA/gpu-operator (v25.3.0 read from the module cache): Deployment gpu-operator, labels app and
// app.kubernetes.io/component gpu-operator, SA gpu-operator, command gpu-operator --leader-elect, and
// the operand images as <COMPONENT>_IMAGE variables, because the ClusterPolicy from alm-examples sets
// no images (imagePath() in NVIDIA/gpu-operator api/nvidia/v1/clusterpolicy_types.go@v26.7.0; NVIDIA/cloud-native-docs openshift/install-gpu-ocp.rst). The real CSV pins digests; the stand-in uses the tags of
// NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0 for v26.7.0 (the operator's own image follows the CSV version).
func gpuOperatorBundleStrategy(version string, rules []rbacv1.PolicyRule, tolerations []corev1.Toleration) olmStrategy {
	tag := "v" + strings.TrimPrefix(version, "v")
	selector := map[string]string{"app": "gpu-operator", "app.kubernetes.io/component": "gpu-operator"}
	podLabels := maps.Clone(selector)
	podLabels["nvidia.com/gpu-driver-upgrade-drain.skip"] = "true"
	env := OperatorImageEnv(tag)
	return olmStrategy{
		ClusterPermissions: []olmPermission{{ServiceAccountName: "gpu-operator", Rules: rules}},
		Deployments: []olmStrategyDeployment{{
			Name: "gpu-operator",
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: selector},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
					Spec: corev1.PodSpec{
						ServiceAccountName: "gpu-operator",
						PriorityClassName:  "system-node-critical",
						Tolerations:        tolerations,
						Containers: []corev1.Container{{
							Name:    "gpu-operator",
							Image:   "nvcr.io/nvidia/gpu-operator:" + tag,
							Command: []string{"gpu-operator"},
							Args:    []string{"--leader-elect", "--leader-lease-renew-deadline", "60s"},
							Env:     env,
						}},
					},
				},
			},
		}},
	}
}

// operatorImageEnv is the operator container's environment in NVIDIA's bundle: its namespace, and the
// operand images as <COMPONENT>_IMAGE variables, which the operator falls back to for images a
// ClusterPolicy leaves unset (imagePath() in NVIDIA/gpu-operator api/nvidia/v1/clusterpolicy_types.go@v26.7.0). tag is the operator's own image tag; the operand images
// are those gpuctl's catalog pins for that release (gpuctl's default release's for another tag).
func OperatorImageEnv(tag string) []corev1.EnvVar {
	env := []corev1.EnvVar{{
		Name:      "OPERATOR_NAMESPACE",
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}},
	}}
	b, err := bundle.Get(tag)
	if err != nil {
		b = bundle.Default()
	}
	env = append(env, corev1.EnvVar{Name: "VALIDATOR_IMAGE", Value: "nvcr.io/nvidia/gpu-operator:" + tag})
	for _, kv := range [][2]string{
		{"GFD_IMAGE", "gfd"},
		{"CONTAINER_TOOLKIT_IMAGE", "toolkit"},
		{"DCGM_IMAGE", "dcgm"},
		{"DCGM_EXPORTER_IMAGE", "dcgmExporter"},
		{"DEVICE_PLUGIN_IMAGE", "devicePlugin"},
		{"DRIVER_IMAGE", "driver"},
		{"DRIVER_MANAGER_IMAGE", "driverManager"},
		{"MIG_MANAGER_IMAGE", "migManager"},
		{"VFIO_MANAGER_IMAGE", "vfioManager"},
		{"SANDBOX_DEVICE_PLUGIN_IMAGE", "sandboxDevicePlugin"},
		{"VGPU_DEVICE_MANAGER_IMAGE", "vgpuDeviceManager"},
		{"GDS_IMAGE", "gds"},
		{"GDRCOPY_IMAGE", "gdrcopy"},
		{"CC_MANAGER_IMAGE", "ccManager"},
	} {
		if img, ok := b.Images[kv[1]]; ok {
			env = append(env, corev1.EnvVar{Name: kv[0], Value: img.String()})
		}
	}
	// Up to v25.10 the CSV also names the CUDA base image, which the controller's OpenShift transform of
	// dcgm-exporter requires (NVIDIA/gpu-operator
	// bundle/manifests/gpu-operator-certified.clusterserviceversion.yaml@v25.10.1: CUDA_BASE_IMAGE).
	if img, ok := b.Images["vfioManager"]; ok && img.Image == "cuda" {
		env = append(env, corev1.EnvVar{Name: "CUDA_BASE_IMAGE", Value: img.String()})
	}
	return env
}
