// Package standintest holds what the stand-ins' unit tests share: running a stand-in for a test, waiting
// for a condition, and fake nodes and pods. Only tests import it.
package standintest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Timeout bounds how long a stand-in test waits for what it expects.
const Timeout = 10 * time.Second

// Start runs a stand-in until the test ends and checks that it stops cleanly.
func Start(t *testing.T, run func(ctx context.Context, logf func(string, ...any)) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, t.Logf) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("stand-in returned %v", err)
			}
		case <-time.After(Timeout):
			t.Errorf("stand-in did not stop")
		}
	})
}

// EventuallyOK fails the test unless cond holds within Timeout; cond's last complaint is reported.
func EventuallyOK(t *testing.T, what string, cond func(ctx context.Context) (problem string, err error)) {
	t.Helper()
	last := ""
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, Timeout, true, func(ctx context.Context) (bool, error) {
		p, err := cond(ctx)
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		if err != nil {
			p = err.Error()
		}
		last = p
		return p == "", nil
	})
	if err != nil {
		t.Fatalf("%s: %v; last seen: %s", what, err, last)
	}
}

// ConsistentlyOK fails the test if cond stops holding during d.
func ConsistentlyOK(t *testing.T, what string, d time.Duration, cond func(ctx context.Context) (problem string, err error)) {
	t.Helper()
	ctx := context.Background()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		p, err := cond(ctx)
		if err != nil {
			p = err.Error()
		}
		if p != "" {
			t.Fatalf("%s: %s", what, p)
		}
	}
}

// CreateTyped creates obj with create and fails the test on error.
func CreateTyped[T any](t *testing.T, create func(context.Context, T, metav1.CreateOptions) (T, error), obj T) T {
	t.Helper()
	out, err := create(context.Background(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// CreateUnstructured creates obj in dyn and fails the test on error.
func CreateUnstructured(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) {
	t.Helper()
	if _, err := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Node is a node with a kernel version and labels, as a kubelet would register it.
func Node(name, kernel string, labels map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{
			NodeInfo: corev1.NodeSystemInfo{KernelVersion: kernel, OSImage: "Ubuntu 22.04.4 LTS"},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
		},
	}
}

// Pod is a Running pod on node, Ready or not.
func Pod(ns, name, node string, ready bool, containers ...corev1.Container) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name + "/" + fmt.Sprint(time.Now().UnixNano()))},
		Spec:       corev1.PodSpec{NodeName: node, Containers: containers},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	return p
}

// GetNode reads a node.
func GetNode(ctx context.Context, cs kubernetes.Interface, name string) (*corev1.Node, error) {
	return cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

// MissingLabels lists the labels of want that node lacks or has with another value.
func MissingLabels(node *corev1.Node, want map[string]string) string {
	var miss []string
	for k, v := range want {
		if node.Labels[k] != v {
			miss = append(miss, fmt.Sprintf("%s=%q (have %q)", k, v, node.Labels[k]))
		}
	}
	slices.Sort(miss)
	return strings.Join(miss, ", ")
}

// Object is an unstructured object of apiVersion and kind named ns/name, with a deep copy of fields
// (spec, status, …) at its top level.
func Object(apiVersion, kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(fields)}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}
