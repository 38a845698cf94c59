package runner

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/record"
)

func TestReleaseFoundNamespaces(t *testing.T) {
	namespace := func(name string, managers ...metav1.ManagedFieldsEntry) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, ManagedFields: managers}}
	}
	entry := func(manager string, op metav1.ManagedFieldsOperationType) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "v1", FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:pod-security.kubernetes.io/enforce":{}}}}`)}}
	}
	applied := entry(kube.FieldManager, metav1.ManagedFieldsOperationApply)
	updated := entry(kube.FieldManager, metav1.ManagedFieldsOperationUpdate)
	others := entry("kubectl-client-side-apply", metav1.ManagedFieldsOperationApply)
	for _, tc := range []struct {
		name     string
		recorded record.Object
		cluster  *corev1.Namespace
		want     []string
	}{
		{"a found namespace gpuctl applied is released", record.Object{Name: "gpu-operator"}, namespace("gpu-operator", others, applied), []string{"gpu-operator"}},
		{"a found namespace gpuctl never applied is left alone", record.Object{Name: "gpu-operator"}, namespace("gpu-operator", others), nil},
		{"gpuctl's updates (not applies) leave nothing to release", record.Object{Name: "gpu-operator"}, namespace("gpu-operator", updated), nil},
		{"a namespace gpuctl created is not released (purge deletes it)", record.Object{Name: "gpu-operator", Created: true}, namespace("gpu-operator", applied), nil},
		{"a found namespace that is gone is skipped", record.Object{Name: "gpu-operator"}, namespace("elsewhere", applied), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := fake.NewClientset(tc.cluster)
			u := &Uninstaller{Clients: &kube.Clients{Kube: kc}, Record: &record.Record{Namespaces: []record.Object{tc.recorded}}}
			got, err := u.releaseFoundNamespaces(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("released %v, want %v", got, tc.want)
			}
			var applies []string
			for _, a := range kc.Actions() {
				if p, ok := a.(k8stesting.PatchAction); ok && p.GetPatchType() == types.ApplyPatchType {
					applies = append(applies, p.GetName())
				}
			}
			if !reflect.DeepEqual(applies, tc.want) {
				t.Errorf("applied %v, want %v", applies, tc.want)
			}
		})
	}
}
