package detect

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestTargets(t *testing.T) {
	cluster := nodes(
		node("cp", kubeadmControlPlane()),
		node("gpu-a", labels("cloud.google.com/gke-accelerator", "nvidia-l4", "gpus", "2"), taint("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)),
		node("gpu-b", labels("cloud.google.com/gke-accelerator", "nvidia-l4", "gpus", "8")),
		node("cpu", taint("node.kubernetes.io/not-ready", "", corev1.TaintEffectNoExecute)),
	)
	exists := func(key string) *corev1.NodeSelector {
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpExists}}}}}
	}
	gpuToleration := []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	tests := []struct {
		name string
		w    Workload
		want []string
	}{
		{"no selector and no toleration skips tainted nodes but not lifecycle taints", Workload{}, []string{"gpu-b", "cpu"}},
		{"tolerating everything targets every node", Workload{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}, []string{"cp", "gpu-a", "gpu-b", "cpu"}},
		{"required affinity plus the GPU toleration targets the GPU nodes", Workload{Affinity: exists("cloud.google.com/gke-accelerator"), Tolerations: gpuToleration}, []string{"gpu-a", "gpu-b"}},
		{"a node selector must match exactly", Workload{NodeSelector: map[string]string{"gpus": "8"}}, []string{"gpu-b"}},
		{"an Equal toleration needs the value", Workload{Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Value: "other", Effect: corev1.TaintEffectNoSchedule}}}, []string{"gpu-b", "cpu"}},
		{"a toleration for another effect does not count", Workload{Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}}, []string{"gpu-b", "cpu"}},
		{"Gt compares numbers", Workload{Tolerations: gpuToleration, Affinity: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpus", Operator: corev1.NodeSelectorOpGt, Values: []string{"4"}}}}}}}, []string{"gpu-b"}},
		{"DoesNotExist excludes labelled nodes", Workload{Affinity: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpus", Operator: corev1.NodeSelectorOpDoesNotExist}}}}}}, []string{"cpu"}},
		{"terms are ORed", Workload{Tolerations: gpuToleration, Affinity: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpus", Operator: corev1.NodeSelectorOpIn, Values: []string{"2"}}}},
			{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"cpu"}}}},
		}}}, []string{"gpu-a", "cpu"}},
		{"an empty term list matches nothing", Workload{Affinity: &corev1.NodeSelector{}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := targets(tc.w, cluster); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("targets = %v, want %v", got, tc.want)
			}
		})
	}
}
