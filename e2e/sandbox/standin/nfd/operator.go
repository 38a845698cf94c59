package nfd

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// This file plays Red Hat's Node Feature Discovery Operator, which OLM installs on OpenShift: for a
// NodeFeatureDiscovery resource it deploys nfd-master and nfd-worker with the resource's worker
// config and reports their readiness; the labels themselves are then the NFD worker stand-in's (Run).
// Not simulated: nfd-gc, the topology updater, SCCs, RBAC for the operands, and updating operands
// after the CR changes (only the worker config is kept in sync).

// Facts about Red Hat's NFD Operator (openshift/cluster-nfd-operator) and the OLM objects it comes in.
const (
	kindOpenShift = "NodeFeatureDiscovery"
	openShiftAPI  = "nfd.openshift.io/v1"
	// operatorDeployment is the NFD operator's Deployment in Red Hat's nfd bundle.
	operatorDeployment = "nfd-controller-manager"
	// nfdOperandImageEnv is how Red Hat's NFD operator learns its operand image.
	nfdOperandImageEnv = "NODE_FEATURE_DISCOVERY_IMAGE"
	// nfdDefaultOperandImage is the operand of OpenShift 4.19's NFD operator.
	nfdDefaultOperandImage = "registry.redhat.io/openshift4/ose-node-feature-discovery-rhel9:v4.19"
)

var (
	// OpenShiftGVR is the NFD Operator's NodeFeatureDiscovery resource.
	OpenShiftGVR = schema.GroupVersionResource{Group: "nfd.openshift.io", Version: "v1", Resource: "nodefeaturediscoveries"}
	// csvsGVR is OLM's ClusterServiceVersions, in which OLM installs the operator.
	csvsGVR = schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "clusterserviceversions"}
)

type nfdOperator struct {
	cs   kubernetes.Interface
	dyn  dynamic.Interface
	logf func(string, ...any)

	nfds, csvs      cache.GenericLister
	serviceAccounts corelisters.ServiceAccountLister
	configMaps      corelisters.ConfigMapLister
	daemonSets      appslisters.DaemonSetLister
	deployments     appslisters.DeploymentLister
	queue           workqueue.TypedRateLimitingInterface[cache.ObjectName]
}

// RunOperator plays Red Hat's NFD Operator in every namespace where OLM has installed it (a Succeeded
// ClusterServiceVersion whose install strategy deploys nfd-controller-manager), until ctx is done.
func RunOperator(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, logf func(string, ...any)) error {
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0)
	dynFactory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	o := &nfdOperator{
		cs: cs, dyn: dyn, logf: logf,
		nfds:            dynFactory.ForResource(OpenShiftGVR).Lister(),
		csvs:            dynFactory.ForResource(csvsGVR).Lister(),
		serviceAccounts: factory.Core().V1().ServiceAccounts().Lister(),
		configMaps:      factory.Core().V1().ConfigMaps().Lister(),
		daemonSets:      factory.Apps().V1().DaemonSets().Lister(),
		deployments:     factory.Apps().V1().Deployments().Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "nfd-operator-stand-in"}),
	}
	var synced []cache.InformerSynced
	watch := func(inf cache.SharedIndexInformer, fn func(obj any)) error {
		reg, err := inf.AddEventHandler(standin.OnAnyChange(fn))
		if err != nil {
			return fmt.Errorf("nfd operator stand-in: watch: %w", err)
		}
		synced = append(synced, reg.HasSynced)
		return nil
	}
	for _, w := range []struct {
		inf cache.SharedIndexInformer
		fn  func(obj any)
	}{
		{dynFactory.ForResource(OpenShiftGVR).Informer(), o.enqueue},
		{dynFactory.ForResource(csvsGVR).Informer(), o.enqueueNamespace},
		{factory.Core().V1().ServiceAccounts().Informer(), o.enqueueOwner},
		{factory.Core().V1().ConfigMaps().Informer(), o.enqueueOwner},
		{factory.Apps().V1().DaemonSets().Informer(), o.enqueueOwner},
		{factory.Apps().V1().Deployments().Informer(), o.enqueueOwner},
	} {
		if err := watch(w.inf, w.fn); err != nil {
			return err
		}
	}
	return standin.RunController(ctx, "nfd operator stand-in", []standin.InformerFactory{factory, dynFactory}, synced, o.queue, 1, o.reconcile, logf)
}

func (o *nfdOperator) enqueue(obj any) {
	if m, err := meta.Accessor(obj); err == nil {
		o.queue.Add(cache.ObjectName{Namespace: m.GetNamespace(), Name: m.GetName()})
	}
}

// enqueueNamespace enqueues every NodeFeatureDiscovery in obj's namespace (a CSV there changed).
func (o *nfdOperator) enqueueNamespace(obj any) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	objs, err := o.nfds.ByNamespace(m.GetNamespace()).List(labels.Everything())
	if err != nil {
		return
	}
	for _, nfd := range objs {
		o.enqueue(nfd)
	}
}

// enqueueOwner enqueues the NodeFeatureDiscovery that owns obj, if one does.
func (o *nfdOperator) enqueueOwner(obj any) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	for _, ref := range m.GetOwnerReferences() {
		if ref.Kind == kindOpenShift && ref.APIVersion == openShiftAPI {
			o.queue.Add(cache.ObjectName{Namespace: m.GetNamespace(), Name: ref.Name})
		}
	}
}

// installed returns the NFD operator's Deployment (as its CSV declares it) from a Succeeded CSV in
// namespace, or nil: the NFD operator watches NodeFeatureDiscovery objects in its own namespace.
func (o *nfdOperator) installed(namespace string) *appsv1.Deployment {
	objs, err := o.csvs.ByNamespace(namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	for _, obj := range objs {
		csv, ok := obj.(*unstructured.Unstructured)
		if !ok || standin.Field(csv.Object, "status", "phase") != "Succeeded" {
			continue
		}
		var strategy struct {
			Deployments []struct {
				Name string                `json:"name"`
				Spec appsv1.DeploymentSpec `json:"spec"`
			} `json:"deployments"`
		}
		spec, found, err := unstructured.NestedMap(csv.Object, "spec", "install", "spec")
		if err != nil || !found || runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &strategy) != nil {
			continue
		}
		for _, d := range strategy.Deployments {
			if d.Name == operatorDeployment {
				return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: namespace}, Spec: d.Spec}
			}
		}
	}
	return nil
}

// nfdOperatorMasterAvailable is Red Hat's NFD operator's check of its nfd-master Deployment: some
// replica is available (openshift/cluster-nfd-operator controllers/nodefeaturediscovery_status.go,
// getDeploymentConditions).
func nfdOperatorMasterAvailable(d *appsv1.Deployment) bool {
	return d.Status.AvailableReplicas > 0
}

// syncNodeFeatureDiscovery does what Red Hat's NFD operator does for a NodeFeatureDiscovery: deploy
// nfd-master and nfd-worker with the CR's worker config. Not simulated: nfd-gc, the topology updater,
// SCCs, RBAC for the operands, and updating operands after the CR changes (only the worker config is
// kept in sync).
func (o *nfdOperator) reconcile(ctx context.Context, k cache.ObjectName) error {
	cr, err := standin.Get(o.nfds, k.Namespace, k.Name)
	if err != nil || cr == nil {
		return err
	}
	operator := o.installed(k.Namespace)
	if operator == nil {
		return nil // no operator, nothing happens — as on a cluster where the operator is not installed
	}
	image := nfdOperandImage(cr, operator)
	if err := o.ensureNFDConfig(ctx, cr); err != nil {
		return err
	}
	ds, master, err := o.ensureNFDOperands(ctx, cr, image)
	if err != nil {
		return err
	}
	ready := ds.Status.NumberReady > 0 && ds.Status.NumberReady == ds.Status.DesiredNumberScheduled && nfdOperatorMasterAvailable(master)
	return o.writeNFDStatus(ctx, cr, ready)
}

// nfdOperandImage is the NFD image the operator deploys: the CR's, else the operator's default
// (its environment), else the release's.
func nfdOperandImage(cr *unstructured.Unstructured, operator *appsv1.Deployment) string {
	image := standin.Field(cr.Object, "spec", "operand", "image")
	for _, c := range operator.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if image == "" && e.Name == nfdOperandImageEnv {
				image = e.Value
			}
		}
	}
	if image == "" {
		image = nfdDefaultOperandImage
	}
	return image
}

// nfdObjectMeta is the metadata of an object the NFD Operator makes for a NodeFeatureDiscovery: in
// its namespace, owned by it.
func nfdObjectMeta(cr *unstructured.Unstructured, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: name, Namespace: cr.GetNamespace(), Labels: map[string]string{"app": name},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: openShiftAPI, Kind: kindOpenShift, Name: cr.GetName(), UID: cr.GetUID(),
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}},
	}
}

// ensureNFDConfig creates the operands' service accounts and keeps the ConfigMap nfd-worker in step
// with the CR's worker config.
func (o *nfdOperator) ensureNFDConfig(ctx context.Context, cr *unstructured.Unstructured) error {
	ns := cr.GetNamespace()
	objMeta := func(name string) metav1.ObjectMeta { return nfdObjectMeta(cr, name) }
	for _, sa := range []string{"nfd-worker", "nfd-master"} {
		if _, err := o.serviceAccounts.ServiceAccounts(ns).Get(sa); err != nil {
			if err := standin.IgnoreExists(o.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: objMeta(sa)}, metav1.CreateOptions{})); err != nil {
				return fmt.Errorf("create service account %s/%s: %w", ns, sa, err)
			}
		}
	}
	conf := standin.Field(cr.Object, "spec", "workerConfig", "configData")
	cm, err := o.configMaps.ConfigMaps(ns).Get("nfd-worker")
	switch {
	case apierrors.IsNotFound(err):
		cm := &corev1.ConfigMap{ObjectMeta: objMeta("nfd-worker"), Data: map[string]string{standin.NFDWorkerConfSuffix: conf}}
		if err := standin.IgnoreExists(o.cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})); err != nil {
			return fmt.Errorf("create config map %s/nfd-worker: %w", ns, err)
		}
	case err != nil:
		return err
	case cm.Data[standin.NFDWorkerConfSuffix] != conf:
		cm = cm.DeepCopy()
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[standin.NFDWorkerConfSuffix] = conf
		if _, err := o.cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update config map %s/nfd-worker: %w", ns, err)
		}
	}
	return nil
}

// ensureNFDOperands creates nfd-worker's DaemonSet and nfd-master's Deployment if they are missing.
func (o *nfdOperator) ensureNFDOperands(ctx context.Context, cr *unstructured.Unstructured, image string) (*appsv1.DaemonSet, *appsv1.Deployment, error) {
	ns := cr.GetNamespace()
	objMeta := func(name string) metav1.ObjectMeta { return nfdObjectMeta(cr, name) }
	// A create that finds the object already there (the cache is behind) fails and is retried.
	ds, err := o.daemonSets.DaemonSets(ns).Get("nfd-worker")
	if apierrors.IsNotFound(err) {
		if ds, err = o.cs.AppsV1().DaemonSets(ns).Create(ctx, nfdWorkerDaemonSet(objMeta("nfd-worker"), image), metav1.CreateOptions{}); err != nil {
			return nil, nil, fmt.Errorf("create daemon set %s/nfd-worker: %w", ns, err)
		}
		o.logf("nfd operator stand-in: NodeFeatureDiscovery %s/%s: created daemon set nfd-worker", ns, cr.GetName())
	}
	if err != nil {
		return nil, nil, err
	}
	master, err := o.deployments.Deployments(ns).Get("nfd-master")
	if apierrors.IsNotFound(err) {
		if master, err = o.cs.AppsV1().Deployments(ns).Create(ctx, nfdMasterDeployment(objMeta("nfd-master"), image), metav1.CreateOptions{}); err != nil {
			return nil, nil, fmt.Errorf("create deployment %s/nfd-master: %w", ns, err)
		}
		o.logf("nfd operator stand-in: NodeFeatureDiscovery %s/%s: created deployment nfd-master", ns, cr.GetName())
	}
	if err != nil {
		return nil, nil, err
	}
	return ds, master, nil
}

// writeNFDStatus reports the operands' readiness in the CR's conditions, as the NFD Operator does.
func (o *nfdOperator) writeNFDStatus(ctx context.Context, cr *unstructured.Unstructured, ready bool) error {
	status, _, _ := unstructured.NestedMap(cr.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	conds, _ := status["conditions"].([]any)
	if ready {
		conds = standin.SetCondition(conds, "Available", "True", "Available", "nfd-master and nfd-worker are running")
		conds = standin.SetCondition(conds, "Progressing", "False", "Available", "")
	} else {
		conds = standin.SetCondition(conds, "Available", "False", "Progressing", "waiting for nfd-master and nfd-worker to become ready")
		conds = standin.SetCondition(conds, "Progressing", "True", "Progressing", "waiting for nfd-master and nfd-worker to become ready")
	}
	conds = standin.SetCondition(conds, "Degraded", "False", "", "")
	conds = standin.SetCondition(conds, "Upgradeable", "True", "", "")
	status["conditions"] = conds
	return standin.WriteStatus(ctx, o.dyn, OpenShiftGVR, cr, status, "")
}

// nfdWorkerDaemonSet is nfd-worker on every node, reading nfd-worker.conf from the ConfigMap nfd-worker.
func nfdWorkerDaemonSet(m metav1.ObjectMeta, image string) *appsv1.DaemonSet {
	const confDir = "/etc/kubernetes/node-feature-discovery"
	return &appsv1.DaemonSet{
		ObjectMeta: m,
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": m.Name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": m.Name}},
				Spec: corev1.PodSpec{
					ServiceAccountName: "nfd-worker",
					Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name:         "nfd-worker",
						Image:        image,
						Command:      []string{"nfd-worker"},
						Args:         []string{"-config=" + confDir + "/" + standin.NFDWorkerConfSuffix},
						VolumeMounts: []corev1.VolumeMount{{Name: "nfd-worker-config", MountPath: confDir, ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{
						Name: "nfd-worker-config",
						VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: "nfd-worker"},
							Items:                []corev1.KeyToPath{{Key: standin.NFDWorkerConfSuffix, Path: standin.NFDWorkerConfSuffix}},
						}},
					}},
				},
			},
		},
	}
}

// nfdMasterDeployment is one nfd-master, allowed onto control-plane nodes as Red Hat's operator places it.
func nfdMasterDeployment(m metav1.ObjectMeta, image string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: m,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": m.Name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": m.Name}},
				Spec: corev1.PodSpec{
					ServiceAccountName: "nfd-master",
					Tolerations: []corev1.Toleration{
						{Key: "node-role.kubernetes.io/master", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
						{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
					},
					Containers: []corev1.Container{{
						Name:    "nfd-master",
						Image:   image,
						Command: []string{"nfd-master"},
					}},
				},
			},
		},
	}
}
