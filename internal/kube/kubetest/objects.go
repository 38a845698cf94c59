package kubetest

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// ManagedFields is a managedFields entry of manager owning the given labels and annotations.
func ManagedFields(manager string, labels, annotations []string) metav1.ManagedFieldsEntry {
	md := map[string]any{}
	if len(labels) > 0 {
		l := map[string]any{}
		for _, k := range labels {
			l["f:"+k] = map[string]any{}
		}
		md["f:labels"] = l
	}
	if len(annotations) > 0 {
		a := map[string]any{}
		for _, k := range annotations {
			a["f:"+k] = map[string]any{}
		}
		md["f:annotations"] = a
	}
	raw, _ := json.Marshal(map[string]any{"f:metadata": md})
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: raw}}
}

// CustomResource is a cluster-scoped ClusterPolicy (nvidia.com/v1) or NVIDIADriver
// (nvidia.com/v1alpha1) as the API server returns it.
func CustomResource(kind, name string, uid types.UID, annotations map[string]string, mf ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	apiVersion := "nvidia.com/v1"
	if kind == "NVIDIADriver" {
		apiVersion = "nvidia.com/v1alpha1"
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}}}
	u.SetUID(uid)
	u.SetAnnotations(annotations)
	u.SetManagedFields(mf)
	return u
}
