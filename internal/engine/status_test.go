package engine

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestEvaluateStatus(t *testing.T) {
	available := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator"},
		Status: appsv1.DeploymentStatus{AvailableReplicas: 1, Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}}
	policy := func(state, reason string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"state": state,
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": reason}}}}}
	}
	gpuNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: map[string]string{
		"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "8", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}
	cpuNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-1"}}
	readyPod := func(app string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: app + "-x", Labels: map[string]string{"app": app}},
			Spec:   corev1.PodSpec{NodeName: "gpu-1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	healthy := statusInputs{namespace: "gpu-operator", policyName: "cluster-policy", operator: available, policy: policy("ready", "Reconciled"),
		nodes: []corev1.Node{*gpuNode, *cpuNode}, pods: []corev1.Pod{readyPod(validatorApp), readyPod(devicePluginApp), readyPod(toolkitApp)}}

	t.Run("a stack with every check passing is healthy, and its GPU node row reads GFD's labels", func(t *testing.T) {
		res := evaluateStatus(healthy)
		if !res.Healthy {
			t.Fatalf("not healthy: %+v", res.Checks)
		}
		if len(res.Nodes) != 1 {
			t.Fatalf("rows %+v", res.Nodes)
		}
		n := res.Nodes[0]
		if !n.Validated || n.GPUs != 8 || n.Product != "NVIDIA-H100-80GB-HBM3" || n.Allocatable != 8 || !n.Tainted ||
			n.Driver != "-" || n.Toolkit != "Ready" || n.DevicePlugin != "Ready" {
			t.Errorf("row %+v", n)
		}
	})
	t.Run("a GPU node without a Ready validator makes the stack not ready", func(t *testing.T) {
		in := healthy
		in.pods = []corev1.Pod{readyPod(devicePluginApp)}
		res := evaluateStatus(in)
		if res.Healthy || res.Nodes[0].Validated {
			t.Errorf("healthy %v, row %+v", res.Healthy, res.Nodes[0])
		}
		if !hasFailed(res, "gpu nodes", "gpu-1") {
			t.Errorf("checks %+v", res.Checks)
		}
	})
	t.Run("a ClusterPolicy ready for want of GPU nodes is not healthy", func(t *testing.T) {
		in := healthy
		in.policy = policy("ready", "NoGPUNodes")
		if res := evaluateStatus(in); res.Healthy || !hasFailed(res, "clusterpolicy", "NoGPUNodes") {
			t.Errorf("checks %+v", res.Checks)
		}
	})
	t.Run("a missing operator Deployment fails its check", func(t *testing.T) {
		in := healthy
		in.operator = nil
		if res := evaluateStatus(in); res.Healthy || !hasFailed(res, "operator", "not found") {
			t.Errorf("checks %+v", res.Checks)
		}
	})
}

func hasFailed(res *StatusResult, name, text string) bool {
	for _, c := range res.Checks {
		if c.Name == name && c.State == CheckFailed && strings.Contains(c.Message, text) {
			return true
		}
	}
	return false
}
