package taint

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
)

// GPUTaint is the taint gpuctl puts on GPU nodes: nvidia.com/gpu=present:NoSchedule.
//
// Every NVIDIA operand DaemonSet, the validator workload pods and the NFD worker (GPU Operator v26.7.0 values:
// daemonsets.tolerations in NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0) tolerate
// {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}; GKE uses the same key, value and effect on GPU node
// pools (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus); and because the key equals the extended
// resource name, the ExtendedResourceToleration admission plugin, where it is on, adds the toleration to pods that
// request GPUs. It is on in GKE, EKS and AKS but off in upstream Kubernetes (kubeadm, k3s, RKE2, OpenShift), where
// gpuctl's MutatingAdmissionPolicy does the same or gpuctl does not taint by default (plan.DecideTaint); this
// package applies the taint it is given and decides nothing.
//
// It is a variable only because Go has no struct constants; treat it as read-only.
var GPUTaint = corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}

// Tolerates reports whether any of tolerations tolerates taint, with the scheduler's matching rules
// (corev1.Toleration.ToleratesTaint). The numeric Gt/Lt operators are treated as not matching: they are an alpha
// feature that may be off in the cluster, and a false "tolerates" is the dangerous answer here.
func Tolerates(tolerations []corev1.Toleration, taint corev1.Taint) bool {
	// The zero logr.Logger discards; ToleratesTaint only logs for unparsable Gt/Lt values, which we disable.
	var discard klog.Logger
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(discard, &taint, false) {
			return true
		}
	}
	return false
}

// indexKeyEffect returns the index of the taint in taints with want's key and effect, or -1.
//
// The API server keeps taints unique by (key, effect) (node validation), so that pair is the identity of a taint
// on a node. The value does not matter for our goal: NVIDIA's tolerations use operator Exists (values.yaml above), so
// any nvidia.com/gpu:NoSchedule taint already keeps non-GPU pods off the node and lets the operands on.
func indexKeyEffect(taints []corev1.Taint, want corev1.Taint) int {
	for i, t := range taints {
		if t.Key == want.Key && t.Effect == want.Effect {
			return i
		}
	}
	return -1
}

// sameTaint reports whether a and b are the same taint by key, value and effect (TimeAdded ignored).
func sameTaint(a, b corev1.Taint) bool {
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect
}

// Stranded names ("namespace/name") the DaemonSets whose node selector picks one of nodes but whose
// pods do not tolerate t: once the nodes carry t, new pods of theirs are not scheduled there.
func Stranded(dss []appsv1.DaemonSet, nodes []corev1.Node, t corev1.Taint) []string {
	var out []string
	for _, d := range dss {
		spec := d.Spec.Template.Spec
		if Tolerates(spec.Tolerations, t) {
			continue
		}
		sel := labels.SelectorFromSet(spec.NodeSelector)
		if slices.ContainsFunc(nodes, func(n corev1.Node) bool { return sel.Matches(labels.Set(n.Labels)) }) {
			out = append(out, d.Namespace+"/"+d.Name)
		}
	}
	return out
}
