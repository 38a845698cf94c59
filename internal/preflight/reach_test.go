package preflight

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestGPUNodeTaints(t *testing.T) {
	dedicated := map[string]any{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
	policy := func(tols ...any) *unstructured.Unstructured {
		return obj("nvidia.com/v1", "ClusterPolicy", "", "cluster-policy", map[string]any{"spec": map[string]any{"daemonsets": map[string]any{"tolerations": tols}}})
	}
	worker := func(tols ...any) *unstructured.Unstructured {
		spec := podSpec(tols...)
		spec["template"].(map[string]any)["spec"].(map[string]any)["containers"] = []any{map[string]any{"name": "worker", "command": []any{"nfd-worker"}}}
		return obj("apps/v1", "DaemonSet", "gpu-operator", "node-feature-discovery-worker", map[string]any{"spec": spec})
	}
	taints := []corev1.Taint{
		{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule},
	}
	tests := []struct {
		name    string
		objs    []*unstructured.Unstructured
		taints  []corev1.Taint
		status  Status
		msg     string
		notInIt string
	}{
		{"a custom NoSchedule taint nothing tolerates fails, naming node, taint, both DaemonSets and the flag",
			[]*unstructured.Unstructured{policy(gpuToleration()), worker(gpuToleration())}, taints, StatusFail,
			"GPU node gpu-1 has taint dedicated=ml:NoSchedule, which the GPU operator's operands (daemonsets.tolerations) and the NFD worker (node-feature-discovery.worker.tolerations) do not tolerate", ""},
		{"only the NFD worker lacking the toleration is named",
			[]*unstructured.Unstructured{policy(gpuToleration(), dedicated), worker(gpuToleration())}, taints, StatusFail,
			"which the NFD worker (node-feature-discovery.worker.tolerations) do not tolerate", "operands"},
		{"tolerations for the taint (--tolerate-existing-taints, or -f) pass",
			[]*unstructured.Unstructured{policy(gpuToleration(), dedicated), worker(gpuToleration(), dedicated)}, taints, StatusPass, "tolerate the taints of all 1 GPU nodes", ""},
		{"PreferNoSchedule and the DaemonSet controller's own taints do not keep DaemonSets off",
			[]*unstructured.Unstructured{policy(gpuToleration()), worker(gpuToleration())}, []corev1.Taint{
				{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule},
				{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule},
			}, StatusPass, "tolerate", ""},
		{"an install that renders neither (another NFD, OpenShift) skips", nil, taints, StatusSkip, "does not apply", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv()
			env.Detection.GPUNodes[0].Taints = tc.taints
			env.Objects = tc.objs
			r := run(t, "gpu-node-taints", env)
			hint := ""
			if tc.status == StatusFail {
				hint = "--tolerate-existing-taints"
			}
			expect(t, r, tc.status, tc.msg, hint)
			if tc.notInIt != "" && strings.Contains(r.Message, tc.notInIt) {
				t.Errorf("message %q mentions %q", r.Message, tc.notInIt)
			}
		})
	}
}
