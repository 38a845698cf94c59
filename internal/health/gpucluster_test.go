package health

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
)

// gpuCluster builds a GPUCluster as the GPU Operator v26.7.0 reports it (internal/conditions/gpucluster.go):
// ready sets Ready True Reconciled; an error sets Ready False reason Error and Error True with the reason.
func gpuCluster(state, errReason string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster",
		"metadata": map[string]any{"name": "gpu-cluster"}, "spec": map[string]any{},
	}}
	if state == "" {
		return u
	}
	conds := []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "Reconciled", "message": "All resources have been successfully reconciled"},
		map[string]any{"type": "Error", "status": "False", "reason": "Ready"},
	}
	if errReason != "" {
		conds = []any{
			map[string]any{"type": "Ready", "status": "False", "reason": "Error"},
			map[string]any{"type": "Error", "status": "True", "reason": errReason, "message": "msg for " + errReason},
		}
	}
	u.Object["status"] = map[string]any{"state": state, "namespace": "gpu-operator", "conditions": conds}
	return u
}

func TestGPUClusterReady(t *testing.T) {
	tests := []struct {
		name     string
		initial  *unstructured.Unstructured
		then     *unstructured.Unstructured
		grace    time.Duration
		wantErr  error
		wantLast string
	}{
		{"ready once every operand is ready", gpuCluster("notReady", "OperandNotReady"), gpuCluster("ready", ""), 0, nil, "state ready (Reconciled)"},
		{"a GPUCluster without status waits", gpuCluster("", ""), gpuCluster("ready", ""), 0, nil, "state ready (Reconciled)"},
		{"a ClusterPolicy next to it fails the wait past the grace period", gpuCluster("notReady", "PrerequisiteNotMet"), nil, 100 * time.Millisecond, ErrGPUClusterBlocked, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{GPUClusterResource(): "GPUClusterList"}, tt.initial)
			rec := newRecorder()
			w := &Waiter{Kube: fake.NewClientset(), Dynamic: dyn, OnProgress: rec.on, GracePeriod: tt.grace, DiagnoseTimeout: -1}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			errc := run(ctx, func(ctx context.Context) error { return w.GPUClusterReady(ctx, "gpu-cluster") })
			rec.waitFor(t, "at all", func(Progress) bool { return true })
			if tt.then != nil {
				if _, err := dyn.Resource(GPUClusterResource()).Update(ctx, tt.then, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			select {
			case err = <-errc:
			case <-time.After(5 * time.Second):
				t.Fatal("the wait did not return")
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("GPUClusterReady() = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				var stuck *StuckError
				if !errors.As(err, &stuck) || !strings.Contains(stuck.Hint, "ClusterPolicy") {
					t.Errorf("error %v: want a StuckError whose hint names the ClusterPolicy", err)
				}
			}
			if msgs := rec.messages(); tt.wantLast != "" && msgs[len(msgs)-1] != tt.wantLast {
				t.Errorf("last progress %q, want %q", msgs[len(msgs)-1], tt.wantLast)
			}
		})
	}
}

func slice(name, driver, node string, devices int) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: &node, Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1}}}
	for i := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: "gpu-" + string(rune('0'+i))})
	}
	return s
}

func TestResourceSlicesPublished(t *testing.T) {
	kube := fake.NewClientset(slice("a", "gpu.nvidia.com", "gpu-a", 2), slice("other", "example.com", "gpu-b", 1))
	rec := newRecorder()
	w := &Waiter{Kube: kube, OnProgress: rec.on, DiagnoseTimeout: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := run(ctx, func(ctx context.Context) error {
		return w.ResourceSlicesPublished(ctx, "gpu.nvidia.com", []string{"gpu-b", "gpu-a"})
	})
	p := rec.waitFor(t, "with one node pending", func(p Progress) bool { return p.Total == 2 })
	if p.Done != 1 || len(p.Pending) != 1 || p.Pending[0] != "gpu-b" {
		t.Fatalf("progress %+v: gpu-a publishes, gpu-b (another driver's slice only) must be pending", p)
	}
	if _, err := kube.ResourceV1().ResourceSlices().Create(ctx, slice("b", "gpu.nvidia.com", "gpu-b", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := result(t, errc); err != nil {
		t.Fatalf("ResourceSlicesPublished() = %v", err)
	}
	slices, devices := ResourceSliceCounts([]resourcev1.ResourceSlice{*slice("a", "gpu.nvidia.com", "gpu-a", 2), *slice("x", "example.com", "gpu-a", 4)}, "gpu.nvidia.com")
	if slices["gpu-a"] != 1 || devices["gpu-a"] != 2 {
		t.Errorf("counts %v %v, want 1 slice with 2 devices of gpu.nvidia.com on gpu-a", slices, devices)
	}
}
