package runner

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/record"
)

// stackResource is a kind of custom resource gpuctl may create for the stack, and uninstall deletes:
// only the objects gpuctl created, which the install record names by UID.
type stackResource struct {
	gvr  schema.GroupVersionResource
	kind string
}

// stackResources are NVIDIA's ClusterPolicy (nvidia.com/v1), GPUCluster and NVIDIADriver (nvidia.com/v1alpha1),
// both cluster-scoped (NVIDIA/gpu-operator api/nvidia/v1 and v1alpha1 at v26.7.0), and Red Hat's NFD
// Operator's NodeFeatureDiscovery (nfd.openshift.io/v1, namespaced), in the order uninstall deletes them.
func stackResources() []stackResource {
	return []stackResource{
		{health.ClusterPolicyResource(), "ClusterPolicy"},
		// The GPUCluster (--dra, nvidia.com/v1alpha1, cluster-scoped, v26.7.0): deleted while the operator
		// still runs, which drains its claim-consuming DaemonSets before releasing its finalizer
		// (controllers/gpucluster_controller.go, reconcileDelete, at v26.7.0).
		{health.GPUClusterResource(), "GPUCluster"},
		{health.NVIDIADriverResource(), "NVIDIADriver"},
		{nfdInstancesGVR, "NodeFeatureDiscovery"},
	}
}

// listStackResources lists every object of the stack's custom resource kinds, in every namespace; a
// kind the cluster does not serve has none.
func listStackResources(ctx context.Context, dyn dynamic.Interface) ([]record.Object, []unstructured.Unstructured, error) {
	var refs []record.Object
	var objs []unstructured.Unstructured
	for _, r := range stackResources() {
		list, err := dyn.Resource(r.gvr).List(ctx, metav1.ListOptions{})
		if kube.Absent(err) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("list %s: %w", r.gvr.Resource, err)
		}
		for _, o := range list.Items {
			refs = append(refs, record.Object{APIVersion: r.gvr.GroupVersion().String(), Kind: r.kind,
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

// provenance says why obj is provably gpuctl's without a record of its UID: it belongs to one of
// releases (Helm's ownership annotations), or gpuctl server-side applied its spec (gpuctl's field
// manager in managedFields, as on OpenShift's ClusterPolicy and NodeFeatureDiscovery). "" when
// neither: nothing says gpuctl made it.
func provenance(obj *unstructured.Unstructured, releases []uninstallRelease) string {
	ann := obj.GetAnnotations()
	for _, r := range releases {
		if ann[helmReleaseNameAnnotation] == r.name && ann[helmReleaseNamespaceAnnotation] == r.namespace {
			return "release " + r.name
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

// describe names an object as kubectl's users read it: "Kind namespace/name" or "Kind name".
func describe(kind, namespace, name string) string {
	if namespace != "" {
		return kind + " " + namespace + "/" + name
	}
	return kind + " " + name
}
