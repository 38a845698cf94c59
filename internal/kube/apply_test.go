package kube

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestSameObject(t *testing.T) {
	namespace := func(labels map[string]string, managers ...string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("Namespace")
		u.SetName("gpu-operator")
		u.SetResourceVersion("42")
		u.SetLabels(labels)
		var mf []metav1.ManagedFieldsEntry
		for _, m := range managers {
			now := metav1.Now()
			fields := `{"f:metadata":{"f:labels":{"f:pod-security.kubernetes.io/enforce":{}}}}`
			if labels == nil {
				fields = `{}`
			}
			mf = append(mf, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationApply, Time: &now,
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}})
		}
		u.SetManagedFields(mf)
		return u
	}
	privileged := map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}
	for _, tc := range []struct {
		name        string
		have, trial *unstructured.Unstructured
		same        bool
	}{
		{"the dry run changed nothing but the managers' times", namespace(privileged, "gpuctl"), namespace(privileged, "gpuctl"), true},
		{"a label the apply adds, with the stored resourceVersion (a dry run never writes)", namespace(nil, "kubectl"), namespace(privileged, "kubectl", "gpuctl"), false},
		{"the same labels, which gpuctl would now own as well", namespace(privileged, "kubectl"), namespace(privileged, "kubectl", "gpuctl"), false},
		{"another manager's bookkeeping entry the server adds", namespace(privileged, "gpuctl"), namespace(privileged, "before-first-apply", "gpuctl"), true},
		{"a controller wrote the status between the read and the dry run", namespace(privileged, "gpuctl"), withStatus(namespace(privileged, "gpuctl"), "Active"), true},
		{"the same status, a label the apply adds", withStatus(namespace(nil, "gpuctl"), "Active"), withStatus(namespace(privileged, "gpuctl"), "Active"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sameObject(tc.have, tc.trial); got != tc.same {
				t.Errorf("sameObject = %v, want %v", got, tc.same)
			}
		})
	}
}

func withStatus(u *unstructured.Unstructured, phase string) *unstructured.Unstructured {
	u.Object["status"] = map[string]any{"phase": phase}
	return u
}
