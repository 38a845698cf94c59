package plan

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// NodeTaint is a taint on a GPU node.
type NodeTaint struct {
	Node  string       `json:"node"`
	Taint corev1.Taint `json:"taint"`
}

func (n NodeTaint) String() string { return n.Node + " " + n.Taint.ToString() }

// Untolerated returns the taints of the GPU nodes that keep a DaemonSet with tolerations off them, in
// node order: NoSchedule and NoExecute taints the list does not tolerate, except those the DaemonSet
// controller tolerates on every DaemonSet pod anyway.
func Untolerated(nodes []detect.GPUNode, tolerations []corev1.Toleration) []NodeTaint {
	var out []NodeTaint
	for _, n := range nodes {
		for _, t := range n.Taints {
			if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
				continue
			}
			if daemonSetTolerates(t) || taint.Tolerates(tolerations, t) {
				continue
			}
			out = append(out, NodeTaint{Node: n.Name, Taint: t})
		}
	}
	return out
}

// daemonSetTolerates: the DaemonSet controller adds these tolerations to every DaemonSet pod
// (https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/#taints-and-tolerations;
// AddOrUpdateDaemonPodTolerations in
// https://github.com/kubernetes/kubernetes/blob/v1.32.0/pkg/controller/daemon/util/daemonset_util.go).
// node.kubernetes.io/network-unavailable is tolerated only by host-network pods, so it is not here.
func daemonSetTolerates(t corev1.Taint) bool {
	switch t.Key {
	case "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable":
		return t.Effect == corev1.TaintEffectNoExecute
	case "node.kubernetes.io/disk-pressure", "node.kubernetes.io/memory-pressure", "node.kubernetes.io/pid-pressure", "node.kubernetes.io/unschedulable":
		return t.Effect == corev1.TaintEffectNoSchedule
	}
	return false
}

// defaultOperandTolerations is daemonsets.tolerations in charts/gpu-operator/values.yaml, as in NVIDIA's
// deployments/gpu-operator/values.yaml at v26.7.0: the operand DaemonSets tolerate only the GPU taint.
func defaultOperandTolerations() []any {
	return []any{gpuToleration()}
}

// defaultNFDWorkerTolerations is worker.tolerations in charts/node-feature-discovery/values.yaml: the
// control-plane taint and the GPU taint.
func defaultNFDWorkerTolerations() []any {
	return []any{controlPlaneToleration(), gpuToleration()}
}

// OperandTolerations and NFDWorkerTolerations are the tolerations release values give the GPU
// operator's operand DaemonSets (daemonsets.tolerations) and the NFD worker (worker.tolerations): the
// values' list, which replaces the chart's, or else the chart's default. An unreadable list tolerates
// nothing.
func OperandTolerations(values map[string]any) []corev1.Toleration {
	return tolerations(listAt(values, defaultOperandTolerations(), "daemonsets", "tolerations"))
}

// NFDWorkerTolerations: see OperandTolerations.
func NFDWorkerTolerations(values map[string]any) []corev1.Toleration {
	return tolerations(listAt(values, defaultNFDWorkerTolerations(), "worker", "tolerations"))
}

func listAt(values map[string]any, def []any, path ...string) []any {
	v := at(values, path...)
	if v == nil {
		return def
	}
	l, _ := v.([]any)
	return l
}

func tolerations(l []any) []corev1.Toleration {
	b, err := json.Marshal(l)
	if err != nil {
		return nil
	}
	var out []corev1.Toleration
	if err := json.Unmarshal(b, &out); err != nil {
		return nil
	}
	return out
}

// existingTaintLayers are the values layers of --tolerate-existing-taints: the operands' and the NFD
// worker's toleration lists as the layers below them leave them, plus one toleration for exactly each
// GPU-node taint the list does not tolerate. A layer with nothing to add has no values.
func existingTaintLayers(det *detect.Result, op, nfd map[string]any) (opLayer, nfdLayer Layer) {
	opLayer, nfdLayer = Layer{Values: map[string]any{}}, Layer{Values: map[string]any{}}
	if add := Untolerated(det.GPUNodes, OperandTolerations(op)); len(add) > 0 {
		opLayer.Source = "--tolerate-existing-taints: " + describeTaints(add)
		set(opLayer.Values, withTolerations(listAt(op, defaultOperandTolerations(), "daemonsets", "tolerations"), add), "daemonsets", "tolerations")
		opLayer.Values = normalized(opLayer.Values)
	}
	if add := Untolerated(det.GPUNodes, NFDWorkerTolerations(nfd)); len(add) > 0 {
		nfdLayer.Source = "--tolerate-existing-taints: " + describeTaints(add)
		set(nfdLayer.Values, withTolerations(listAt(nfd, defaultNFDWorkerTolerations(), "worker", "tolerations"), add), "worker", "tolerations")
		nfdLayer.Values = normalized(nfdLayer.Values)
	}
	return opLayer, nfdLayer
}

// withTolerations is list (copied) with a toleration for each taint that matches it exactly (key,
// value and effect), once per distinct taint.
func withTolerations(list []any, taints []NodeTaint) []any {
	out := cloneValue(list).([]any)
	seen := map[string]bool{}
	for _, nt := range taints {
		t := nt.Taint
		if seen[t.ToString()] {
			continue
		}
		seen[t.ToString()] = true
		out = append(out, map[string]any{"key": t.Key, "operator": "Equal", "value": t.Value, "effect": string(t.Effect)})
	}
	return out
}

func describeTaints(ts []NodeTaint) string {
	var parts []string
	for _, t := range ts {
		parts = append(parts, t.String())
	}
	return fmt.Sprintf("taints on GPU nodes (%s)", strings.Join(parts, ", "))
}
