package kube

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestListNodes(t *testing.T) {
	var objs []runtime.Object
	for _, name := range []string{"gpu-b", "cpu-a", "gpu-a"} {
		objs = append(objs, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": name[:3]},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
			Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"img"}}}},
		})
	}
	c := fake.NewClientset(objs...)
	var seen int
	got, err := ListNodes(context.Background(), c, func(n *corev1.Node) *corev1.Node {
		seen++
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}}
	})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range got {
		names = append(names, n.Name)
		if n.ManagedFields != nil || n.Status.Images != nil {
			t.Errorf("%s kept what keep dropped: %+v", n.Name, n)
		}
		if n.Labels["pool"] != n.Name[:3] {
			t.Errorf("%s lost what keep kept: labels %v", n.Name, n.Labels)
		}
	}
	if want := []string{"cpu-a", "gpu-a", "gpu-b"}; !slices.Equal(names, want) {
		t.Errorf("ListNodes = %v, want %v (sorted by name)", names, want)
	}
	if seen < 3 {
		t.Errorf("keep saw %d nodes, want every one of 3", seen)
	}
}

func TestListNodesFails(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("RBAC"))
	c := fake.NewClientset()
	c.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, forbidden
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := ListNodes(ctx, c, func(n *corev1.Node) *corev1.Node { return n })
	if !apierrors.IsForbidden(err) {
		t.Fatalf("ListNodes = %v, want the list's Forbidden error at once (not a retry until the deadline)", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := ListNodes(ctx, fake.NewClientset(), func(n *corev1.Node) *corev1.Node { return n }); !errors.Is(err, context.Canceled) {
		t.Fatalf("ListNodes with a cancelled context = %v, want context.Canceled", err)
	}
}

// TestListNodesWithoutWatch: a role that may list nodes but not watch them still gets the list (the
// watch that follows a plain LIST fails after the cache is complete).
func TestListNodesWithoutWatch(t *testing.T) {
	c := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a"}})
	c.PrependWatchReactor("nodes", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("RBAC"))
	})
	for range 20 { // the failed watch and the synced cache race; the list must win every time
		got, err := ListNodes(context.Background(), c, func(n *corev1.Node) *corev1.Node { return n })
		if err != nil || len(got) != 1 {
			t.Fatalf("ListNodes without watch = %v, %v; want the one node", got, err)
		}
	}
}
