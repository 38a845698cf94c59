package olm

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// The APIs OLM v0 serves on OpenShift, which the OpenShift flavour registers as CRDs (NVIDIA/cloud-native-docs openshift/install-gpu-ocp.rst).
var (
	SubscriptionsGVR     = schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "subscriptions"}
	olmInstallPlansGVR   = schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "installplans"}
	CSVsGVR              = schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "clusterserviceversions"}
	olmCatalogSourcesGVR = schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "catalogsources"}
	OperatorGroupsGVR    = schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1", Resource: "operatorgroups"}
	PackageManifestsGVR  = schema.GroupVersionResource{Group: "packages.operators.coreos.com", Version: "v1", Resource: "packagemanifests"}
)

const (
	olmAPIVersion      = "operators.coreos.com/v1alpha1"
	olmKindSub         = "Subscription"
	olmKindPlan        = "InstallPlan"
	olmKindCSV         = "ClusterServiceVersion"
	olmKindGroup       = "OperatorGroup"
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
// OpenShift 4.x); what Red Hat's NFD operator does once OLM has installed it is package nfd's
// (RunOperator). It behaves, through the API, like OLM does
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

	subs, plans, csvs, groups, packages cache.GenericLister
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

// watchOLMObjects watches OLM's own resources, each change enqueueing what
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
		}
	})
	o.groups = w.dynWatch(OperatorGroupsGVR, func(obj any) {
		o.enqueue(olmKindGroup, obj)
		if m, err := meta.Accessor(obj); err == nil {
			o.enqueueNamespace(olmKindPlan, o.plans, m.GetNamespace())
		}
	})
	o.packages = w.dynWatch(PackageManifestsGVR, func(any) { o.enqueueNamespace(olmKindSub, o.subs, "") })
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
// reference to a namespaced CSV).
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
	}
	return nil
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

func olmRemoveCondition(conds []any, typ string) []any {
	return slices.DeleteFunc(slices.Clone(conds), func(c any) bool {
		m, ok := c.(map[string]any)
		return ok && m["type"] == typ
	})
}
