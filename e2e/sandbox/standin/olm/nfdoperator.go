package olm

// This file plays Red Hat's Node Feature Discovery Operator, which OLM installs on OpenShift: for a
// NodeFeatureDiscovery resource it deploys nfd-master and nfd-worker with the resource's worker
// config and reports their readiness (the labels themselves are the NFD stand-in's, package nfd).

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// nfdOperatorMasterAvailable is Red Hat's NFD operator's check of its nfd-master Deployment: some
// replica is available (openshift/cluster-nfd-operator controllers/nodefeaturediscovery_status.go,
// getDeploymentConditions).
func nfdOperatorMasterAvailable(d *appsv1.Deployment) bool {
	return d.Status.AvailableReplicas > 0
}

// nfdOperatorBundleStrategy follows Red Hat's nfd bundle: Deployment nfd-controller-manager running
// the operator, which takes its operand image from NODE_FEATURE_DISCOVERY_IMAGE. Image tags follow
// the CSV's OpenShift minor version (4.19.0-… → v4.19).
func nfdOperatorBundleStrategy(version string, rules []rbacv1.PolicyRule, tolerations []corev1.Toleration) olmStrategy {
	tag := "v4.19"
	if parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3); len(parts) >= 2 {
		tag = "v" + parts[0] + "." + parts[1]
	}
	podLabels := map[string]string{"control-plane": "controller-manager"}
	return olmStrategy{
		ClusterPermissions: []olmPermission{{ServiceAccountName: "nfd-manager", Rules: rules}},
		Deployments: []olmStrategyDeployment{{
			Name: nfdOperatorDeployment,
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: podLabels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
					Spec: corev1.PodSpec{
						ServiceAccountName: "nfd-manager",
						Tolerations:        tolerations,
						Containers: []corev1.Container{{
							Name:    "manager",
							Image:   "registry.redhat.io/openshift4/ose-cluster-nfd-operator-rhel9:" + tag,
							Command: []string{"/node-feature-discovery-operator"},
							Args:    []string{"--leader-elect"},
							Env: []corev1.EnvVar{
								{Name: "OPERATOR_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
								{Name: nfdOperandImageEnv, Value: "registry.redhat.io/openshift4/ose-node-feature-discovery-rhel9:" + tag},
							},
						}},
					},
				},
			},
		}},
	}
}

// nfdOperator returns the NFD operator's Deployment from a Succeeded CSV in namespace, or nil: the NFD
// operator watches NodeFeatureDiscovery objects in its own namespace.
func (o *olmStandIn) nfdOperator(namespace string) *olmStrategyDeployment {
	for _, csv := range olmList(o.csvs, namespace) {
		if standin.Field(csv.Object, "status", "phase") != "Succeeded" {
			continue
		}
		s, err := csvStrategy(csv)
		if err != nil {
			continue
		}
		for i := range s.Deployments {
			if s.Deployments[i].Name == nfdOperatorDeployment {
				return &s.Deployments[i]
			}
		}
	}
	return nil
}

// syncNodeFeatureDiscovery does what Red Hat's NFD operator does for a NodeFeatureDiscovery: deploy
// nfd-master and nfd-worker with the CR's worker config. Not simulated: nfd-gc, the topology updater,
// SCCs, RBAC for the operands, and updating operands after the CR changes (only the worker config is
// kept in sync).
func (o *olmStandIn) syncNodeFeatureDiscovery(ctx context.Context, k olmKey) error {
	cr, err := standin.Get(o.nfds, k.namespace, k.name)
	if err != nil || cr == nil {
		return err
	}
	operator := o.nfdOperator(k.namespace)
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
func nfdOperandImage(cr *unstructured.Unstructured, operator *olmStrategyDeployment) string {
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
			APIVersion: nfdOpenShiftAPI, Kind: nfdKindOpenShift, Name: cr.GetName(), UID: cr.GetUID(),
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}},
	}
}

// ensureNFDConfig creates the operands' service accounts and keeps the ConfigMap nfd-worker in step
// with the CR's worker config.
func (o *olmStandIn) ensureNFDConfig(ctx context.Context, cr *unstructured.Unstructured) error {
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
func (o *olmStandIn) ensureNFDOperands(ctx context.Context, cr *unstructured.Unstructured, image string) (*appsv1.DaemonSet, *appsv1.Deployment, error) {
	ns := cr.GetNamespace()
	objMeta := func(name string) metav1.ObjectMeta { return nfdObjectMeta(cr, name) }
	// A create that finds the object already there (the cache is behind) fails and is retried.
	ds, err := o.daemonSets.DaemonSets(ns).Get("nfd-worker")
	if apierrors.IsNotFound(err) {
		if ds, err = o.cs.AppsV1().DaemonSets(ns).Create(ctx, nfdWorkerDaemonSet(objMeta("nfd-worker"), image), metav1.CreateOptions{}); err != nil {
			return nil, nil, fmt.Errorf("create daemon set %s/nfd-worker: %w", ns, err)
		}
		o.logf("olm stand-in: NodeFeatureDiscovery %s/%s: created daemon set nfd-worker", ns, cr.GetName())
	}
	if err != nil {
		return nil, nil, err
	}
	master, err := o.deployments.Deployments(ns).Get("nfd-master")
	if apierrors.IsNotFound(err) {
		if master, err = o.cs.AppsV1().Deployments(ns).Create(ctx, nfdMasterDeployment(objMeta("nfd-master"), image), metav1.CreateOptions{}); err != nil {
			return nil, nil, fmt.Errorf("create deployment %s/nfd-master: %w", ns, err)
		}
		o.logf("olm stand-in: NodeFeatureDiscovery %s/%s: created deployment nfd-master", ns, cr.GetName())
	}
	if err != nil {
		return nil, nil, err
	}
	return ds, master, nil
}

// writeNFDStatus reports the operands' readiness in the CR's conditions, as the NFD Operator does.
func (o *olmStandIn) writeNFDStatus(ctx context.Context, cr *unstructured.Unstructured, ready bool) error {
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
	return standin.WriteStatus(ctx, o.dyn, nfdOpenShiftGVR, cr, status, "")
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
