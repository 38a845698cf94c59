package engine

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestEvaluateStatusDRA(t *testing.T) {
	available := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator"},
		Status: appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1, Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}}
	gc := func(state, readyReason, errReason string) *unstructured.Unstructured {
		ready := map[string]any{"type": "Ready", "status": "True", "reason": readyReason}
		conds := []any{ready}
		if errReason != "" {
			ready["status"], ready["reason"] = "False", "Error"
			conds = append(conds, map[string]any{"type": "Error", "status": "True", "reason": errReason, "message": "Waiting for operand pods to be ready"})
		}
		return &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"state": state, "conditions": conds}}}
	}
	node := func(name string) corev1.Node {
		// No allocatable nvidia.com/gpu: a DRA stack has no device plugin.
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"nvidia.com/gpu.present": "true"}}}
	}
	ready := func(app, node string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: app + "-" + node, Labels: map[string]string{"app": app}}, Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	slice := func(node string, devices int) resourcev1.ResourceSlice {
		s := resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu"}, Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: &node}}
		for range devices {
			s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: "gpu"})
		}
		return s
	}
	healthy := statusInputs{namespace: "gpu-operator", operator: available, dra: true, gpuCluster: gc("ready", "Reconciled", ""),
		nodes:  []corev1.Node{node("gpu-a"), node("gpu-b")},
		pods:   []corev1.Pod{ready(validatorApp, "gpu-a"), ready(validatorApp, "gpu-b"), ready(draKubeletPluginApp, "gpu-a"), ready(draKubeletPluginApp, "gpu-b")},
		slices: []resourcev1.ResourceSlice{slice("gpu-a", 2), slice("gpu-b", 1)}}

	t.Run("a ready GPUCluster with slices on every GPU node is healthy without allocatable nvidia.com/gpu", func(t *testing.T) {
		res := evaluateStatus(healthy)
		if !res.Healthy {
			t.Fatalf("not healthy: %+v", res.Checks)
		}
		for _, c := range res.Checks {
			if c.Name == "clusterpolicy" || c.Name == "allocatable" {
				t.Errorf("a DRA stack has no %s check: %+v", c.Name, c)
			}
		}
		if a := res.Nodes[0]; a.DRADriver != "Ready" || a.ResourceSlices != 1 || a.Devices != 2 {
			t.Errorf("row %+v: want the DRA driver Ready with 1 slice of 2 devices", a)
		}
	})
	t.Run("a node without slices fails the resourceslices check naming it", func(t *testing.T) {
		in := healthy
		in.slices = in.slices[:1]
		if res := evaluateStatus(in); res.Healthy || !hasFailed(res, "resourceslices", "gpu-b") {
			t.Errorf("checks %+v", res.Checks)
		}
	})
	t.Run("a GPUCluster waiting for its operands is not healthy and says why", func(t *testing.T) {
		in := healthy
		in.gpuCluster = gc("notReady", "", "OperandNotReady")
		if res := evaluateStatus(in); res.Healthy || !hasFailed(res, "gpucluster", "OperandNotReady: Waiting for operand pods") {
			t.Errorf("checks %+v", res.Checks)
		}
	})
	t.Run("a missing GPUCluster fails its check", func(t *testing.T) {
		in := healthy
		in.gpuCluster = nil
		if res := evaluateStatus(in); res.Healthy || !hasFailed(res, "gpucluster", "not found") {
			t.Errorf("checks %+v", res.Checks)
		}
	})
}
