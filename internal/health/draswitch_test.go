package health

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
)

// operand is a DaemonSet in gpu-operator owned by the operator's custom resource kind, rolled out or
// not.
func operand(name, ownerKind string, rolledOut bool) *appsv1.DaemonSet {
	apiVersion := "nvidia.com/v1"
	if ownerKind == "GPUCluster" {
		apiVersion = "nvidia.com/v1alpha1"
	}
	ctrl := true
	d := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "gpu-operator", Generation: 1,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: ownerKind, Name: "x", Controller: &ctrl}}}}
	d.Status = appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 2}
	if !rolledOut {
		d.Status.NumberAvailable = 1
	}
	return d
}

// TestOperandsRolledOutOnTheDRAStack: after a switch to the DRA stack the operands are the
// GPUCluster's (the DRA driver's kubelet plugin, its validator, DCGM Exporter) and the ClusterPolicy's
// are gone: the wait counts the GPUCluster's and ends when they have rolled out, instead of waiting on
// "0/0 operand DaemonSets rolled out" until the deadline; a DaemonSet on its way out does not count.
func TestOperandsRolledOutOnTheDRAStack(t *testing.T) {
	leaving := operand("nvidia-device-plugin-daemonset", "ClusterPolicy", false)
	leaving.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	leaving.Finalizers = []string{"foregroundDeletion"}
	kube := fake.NewClientset(operand("nvidia-dra-driver-kubelet-plugin", "GPUCluster", true), operand("nvidia-dra-validator", "GPUCluster", false), leaving)
	rec := newRecorder()
	w := &Waiter{Kube: kube, OnProgress: rec.on, DiagnoseTimeout: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := run(ctx, func(ctx context.Context) error { return w.OperandsRolledOut(ctx, "gpu-operator") })
	rec.waitForMessage(t, "1/2 operand DaemonSets rolled out")
	ds := operand("nvidia-dra-validator", "GPUCluster", true)
	if _, err := kube.AppsV1().DaemonSets("gpu-operator").UpdateStatus(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := result(t, errc); err != nil {
		t.Fatalf("OperandsRolledOut() = %v, want nil once the GPUCluster's operands rolled out", err)
	}
}

// TestClusterPolicyReadyOnTheDRAStack: an upgrade that switched to the DRA stack waits for the stack's
// custom resource, which is GPUCluster gpu-cluster now: NVIDIA's chart renders a ClusterPolicy or a
// GPUCluster, never both. The wait ends when the GPUCluster is ready instead of waiting for a
// ClusterPolicy that no longer exists.
func TestClusterPolicyReadyOnTheDRAStack(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		ClusterPolicyResource(): "ClusterPolicyList", GPUClusterResource(): "GPUClusterList"}, gpuCluster("notReady", "OperandNotReady"))
	rec := newRecorder()
	w := &Waiter{Kube: fake.NewClientset(), Dynamic: dyn, OnProgress: rec.on, DiagnoseTimeout: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := run(ctx, func(ctx context.Context) error { return w.ClusterPolicyReady(ctx, "cluster-policy") })
	rec.waitFor(t, "on the GPUCluster", func(p Progress) bool { return strings.HasPrefix(p.Message, "state notReady") })
	if _, err := dyn.Resource(GPUClusterResource()).Update(ctx, gpuCluster("ready", ""), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := result(t, errc); err != nil {
		t.Fatalf("ClusterPolicyReady() = %v, want nil once the GPUCluster is ready", err)
	}
}
