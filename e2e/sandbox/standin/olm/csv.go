package olm

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

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
	group, err := standin.Get(o.groups, k.namespace, k.name)
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
	return standin.WriteStatus(ctx, o.dyn, OperatorGroupsGVR, group, status, "lastUpdated")
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
	csv, err := standin.Get(o.csvs, k.namespace, k.name)
	if err != nil {
		return err
	}
	if csv == nil {
		return o.deleteClusterScoped(ctx, k)
	}
	strategy, err := csvStrategy(csv)
	if err != nil {
		if standin.Field(csv.Object, "status", "phase") == "Failed" {
			return nil
		}
		return o.setCSVPhase(ctx, csv, "Failed", "InvalidInstallStrategy", err.Error())
	}
	switch phase := standin.Field(csv.Object, "status", "phase"); phase {
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
			if old := standin.Field(csv.Object, "spec", "replaces"); old != "" {
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
			if standin.Field(csv.Object, "status", "message") != msg {
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
	now := standin.Timestamp()
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
		csv: csv, ns: csv.GetNamespace(), replaces: standin.Field(csv.Object, "spec", "replaces"),
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
		if crds, err = o.bundleCRDs(pkg, standin.Field(csv.Object, "spec", "version")); err != nil {
			return fmt.Errorf("bundle CRDs of %s: %w", csv.GetName(), err)
		}
	}
	replaces := standin.Field(csv.Object, "spec", "replaces")
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
		if err := standin.IgnoreExists(o.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: objMeta(sa, true)}, metav1.CreateOptions{})); err != nil {
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
			if err := standin.IgnoreExists(o.cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: objMeta(name, true), Rules: p.Rules}, metav1.CreateOptions{})); err != nil {
				return fmt.Errorf("create role %s/%s: %w", ns, name, err)
			}
		}
		if _, err := o.roleBindings.RoleBindings(ns).Get(name); err != nil {
			rb := &rbacv1.RoleBinding{
				ObjectMeta: objMeta(name, true),
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: p.ServiceAccountName, Namespace: ns}},
			}
			if err := standin.IgnoreExists(o.cs.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{})); err != nil {
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
			if err := standin.IgnoreExists(o.cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: objMeta(name, false), Rules: p.Rules}, metav1.CreateOptions{})); err != nil {
				return fmt.Errorf("create cluster role %s: %w", name, err)
			}
		}
		if _, err := o.clusterRoleBindings.Get(name); err != nil {
			crb := &rbacv1.ClusterRoleBinding{
				ObjectMeta: objMeta(name, false),
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: p.ServiceAccountName, Namespace: ns}},
			}
			if err := standin.IgnoreExists(o.cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})); err != nil {
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
