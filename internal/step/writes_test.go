package step

import (
	"context"
	"slices"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuctl/gpuctl/internal/lock"
	"github.com/gpuctl/gpuctl/internal/record"
)

func TestBookkeepingWrites(t *testing.T) {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.DefaultName, Namespace: lock.DefaultNamespace}}
	rec := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: record.Name, Namespace: record.Namespace}}
	tests := []struct {
		name string
		objs []runtime.Object
		want []string
	}{
		{"a first install creates the Lease and the record", nil,
			[]string{"create Lease kube-system/gpuctl", "create ConfigMap kube-system/gpuctl-install"}},
		{"a later one updates them", []runtime.Object{lease, rec},
			[]string{"update Lease kube-system/gpuctl", "update ConfigMap kube-system/gpuctl-install"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws, err := bookkeepingWrites(context.Background(), fake.NewClientset(tc.objs...))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range ws {
				got = append(got, w.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
