package record

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
)

// What the record's objects are in the cluster: read by install when it writes the record and by
// uninstall when it decides what is gpuctl's.

// NFDInstancesResource is Red Hat's NFD Operator's NodeFeatureDiscovery (nfd.openshift.io/v1, namespaced).
func NFDInstancesResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "nfd.openshift.io", Version: "v1", Resource: "nodefeaturediscoveries"}
}

// StackResource is a kind of custom resource gpuctl may create for the stack, and uninstall deletes:
// only the objects gpuctl created, which the install record names by UID.
type StackResource struct {
	GVR  schema.GroupVersionResource
	Kind string
}

// StackResources are NVIDIA's ClusterPolicy (nvidia.com/v1), GPUCluster and NVIDIADriver
// (nvidia.com/v1alpha1), cluster-scoped (NVIDIA/gpu-operator api/nvidia/v1 and v1alpha1 at v26.7.0),
// and Red Hat's NFD Operator's NodeFeatureDiscovery, in the order uninstall deletes them.
func StackResources() []StackResource {
	return []StackResource{
		{health.ClusterPolicyResource(), "ClusterPolicy"},
		// The GPUCluster (--dra, nvidia.com/v1alpha1, cluster-scoped, v26.7.0): deleted while the operator
		// still runs, which drains its claim-consuming DaemonSets before releasing its finalizer
		// (controllers/gpucluster_controller.go, reconcileDelete, at v26.7.0).
		{health.GPUClusterResource(), "GPUCluster"},
		{health.NVIDIADriverResource(), "NVIDIADriver"},
		{NFDInstancesResource(), "NodeFeatureDiscovery"},
	}
}

// ListStackResources lists every object of the stack's custom resource kinds, in every namespace; a
// kind the cluster does not serve has none.
func ListStackResources(ctx context.Context, dyn dynamic.Interface) ([]Object, []unstructured.Unstructured, error) {
	var refs []Object
	var objs []unstructured.Unstructured
	for _, r := range StackResources() {
		list, err := dyn.Resource(r.GVR).List(ctx, metav1.ListOptions{})
		if kube.Absent(err) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("list %s: %w", r.GVR.Resource, err)
		}
		for _, o := range list.Items {
			refs = append(refs, Object{APIVersion: r.GVR.GroupVersion().String(), Kind: r.Kind,
				Namespace: o.GetNamespace(), Name: o.GetName(), UID: o.GetUID(), Created: true})
			objs = append(objs, o)
		}
	}
	return refs, objs, nil
}

// Helm's release ownership annotations (helm.sh/helm/v4 pkg/action: every object of a release carries them).
const (
	helmReleaseNameAnnotation      = "meta.helm.sh/release-name"
	helmReleaseNamespaceAnnotation = "meta.helm.sh/release-namespace"
)

// ReleaseRef names a Helm release.
type ReleaseRef struct {
	Name, Namespace string
}

// Provenance says why obj is provably gpuctl's without a record of its UID: it belongs to one of
// releases (Helm's ownership annotations), or gpuctl server-side applied its spec (gpuctl's field
// manager in managedFields, as on OpenShift's ClusterPolicy and NodeFeatureDiscovery). "" when
// neither: nothing says gpuctl made it.
func Provenance(obj *unstructured.Unstructured, releases []ReleaseRef) string {
	ann := obj.GetAnnotations()
	for _, r := range releases {
		if ann[helmReleaseNameAnnotation] == r.Name && ann[helmReleaseNamespaceAnnotation] == r.Namespace {
			return "release " + r.Name
		}
	}
	for _, m := range obj.GetManagedFields() {
		if m.Manager != kube.FieldManager || m.Operation != metav1.ManagedFieldsOperationApply || m.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(m.FieldsV1.Raw, &fields) == nil && fields["f:spec"] != nil {
			return "applied by gpuctl"
		}
	}
	return ""
}

// UIDNow is the UID of the object o names as it is now ("" when there is none; a kind the cluster
// does not serve has none).
func UIDNow(ctx context.Context, clients *kube.Clients, o Object) (types.UID, error) {
	ri, err := Resource(clients, o)
	if err != nil {
		if kube.Absent(err) {
			return "", nil
		}
		return "", err
	}
	obj, err := ri.Get(ctx, o.Name, metav1.GetOptions{})
	if kube.Absent(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return obj.GetUID(), nil
}

// Resource is the dynamic client of the object o names.
func Resource(clients *kube.Clients, o Object) (dynamic.ResourceInterface, error) {
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	if err != nil {
		return nil, err
	}
	m, err := clients.Mapper.RESTMapping(gv.WithKind(o.Kind).GroupKind(), gv.Version)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return clients.Dynamic.Resource(m.Resource).Namespace(o.Namespace), nil
	}
	return clients.Dynamic.Resource(m.Resource), nil
}
