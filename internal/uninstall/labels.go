package uninstall

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/record"
)

// Who writes node labels in the stack's prefixes, as the API server records them in managedFields. A
// client that names no field manager is recorded under its user agent's program name
// (https://kubernetes.io/docs/reference/using-api/server-side-apply/#managers), so:
//   - nfd-master: Node Feature Discovery's labels and annotations (kubernetes-sigs/node-feature-discovery
//     v0.19.0 pkg/nfd-master/nfd-master.go:1576 patches nodes with empty PatchOptions, through a client
//     pkg/utils/kubernetes.go:51-56 builds without a user agent, so client-go's default one names the
//     program, os.Args[0]; Red Hat's NFD Operator runs the same nfd-master). The sandbox runs the real
//     nfd-master v0.19.0 and TestInstallWithNoFlags reads this manager back from the nodes' managedFields. GPU feature discovery's nvidia.com/gpu.* labels
//     reach the node the same way, through NodeFeature objects nfd-master applies.
//   - gpu-operator: NVIDIA's operator, its node labelling and its driver upgrade controller
//     (NVIDIA/gpu-operator controllers/nodelabeling_controller.go and upgrade_controller.go at v26.7.0,
//     controller-runtime's client with its default user agent, binary cmd/gpu-operator).
//   - gpuctl: gpuctl's own patches (kube.FieldManager).
var stackManagers = []string{"nfd-master", "gpu-operator", kube.FieldManager}

// kubectlLabelManager is `kubectl label`'s field manager. An admin's `kubectl label` is theirs, but
// NVIDIA's MIG manager sets its state and pauses the operands with `kubectl label --overwrite` too
// (NVIDIA/mig-parted deployments/gpu-operator/reconfigure-mig.go): those keys, and only those, are
// the stack's when kubectl-label wrote them.
const kubectlLabelManager = "kubectl-label"

// stackKubectlKey says whether key is one the MIG manager sets with kubectl label.
func stackKubectlKey(key string) bool {
	return key == "nvidia.com/mig.config.state" || strings.HasPrefix(key, "nvidia.com/gpu.deploy.")
}

// stackWritten reports whether the stack wrote key: it has field managers and every one of them is the
// stack's. A key anyone else also wrote (kubectl label, an admin's controller) is theirs to keep, and
// so is a key whose writer the API server did not record.
func stackWritten(key string, managers []string) bool {
	if len(managers) == 0 {
		return false
	}
	for _, m := range managers {
		if !slices.Contains(stackManagers, m) && (m != kubectlLabelManager || !stackKubectlKey(key)) {
			return false
		}
	}
	return true
}

// NodeLabelPlan is what uninstall changes on one node: the labels and annotations in NFD's and the
// operator's prefixes that the stack wrote go (or get back the value they had before the install);
// those someone else wrote stay.
type NodeLabelPlan struct {
	Node               string            `json:"node"`
	RemoveLabels       []string          `json:"removeLabels,omitempty"`
	RestoreLabels      map[string]string `json:"restoreLabels,omitempty"`
	RemoveAnnotations  []string          `json:"removeAnnotations,omitempty"`
	RestoreAnnotations map[string]string `json:"restoreAnnotations,omitempty"`
	// Kept are keys in the stack's prefixes that someone else wrote: they stay as they are.
	Kept []KeptKey `json:"kept,omitempty"`
}

// KeptKey is a label or annotation uninstall leaves, and who wrote it.
type KeptKey struct {
	Key        string   `json:"key"`
	Annotation bool     `json:"annotation,omitempty"`
	Managers   []string `json:"managers,omitempty"`
}

// empty reports whether the plan changes nothing on the node.
func (p NodeLabelPlan) empty() bool {
	return len(p.RemoveLabels) == 0 && len(p.RestoreLabels) == 0 && len(p.RemoveAnnotations) == 0 && len(p.RestoreAnnotations) == 0
}

// planNodeMetadata decides a node's label and annotation changes. A key in the stack's prefixes is
// the stack's when stackWritten says so from its field managers; nfd and operator say whose keys
// gpuctl may touch at all (a stack gpuctl did not install keeps its labels). A key of the stack that
// was there before the install gets its earlier value back; one that was not goes. A key that was
// there before and is gone now comes back. Every other key stays.
func planNodeMetadata(n *corev1.Node, before record.NodeMetadata, nfd, operator bool) NodeLabelPlan {
	mine := func(k string) bool {
		if !record.InStackPrefix(k) {
			return false
		}
		if record.IsNFDKey(k) {
			return nfd
		}
		return operator
	}
	labelManagers, annotationManagers := kube.MetadataManagers(n.ManagedFields)
	p := NodeLabelPlan{Node: n.Name}
	decide := func(cur, was map[string]string, managers map[string][]string, annotation bool) (remove []string, restore map[string]string) {
		restore = map[string]string{}
		for _, k := range slices.Sorted(maps.Keys(cur)) {
			if !mine(k) {
				continue
			}
			old, existed := was[k]
			if existed && old == cur[k] {
				continue
			}
			if !stackWritten(k, managers[k]) {
				p.Kept = append(p.Kept, KeptKey{Key: k, Annotation: annotation, Managers: managers[k]})
				continue
			}
			if existed {
				restore[k] = old
			} else {
				remove = append(remove, k)
			}
		}
		for k, old := range was {
			if _, ok := cur[k]; !ok && mine(k) {
				restore[k] = old
			}
		}
		if len(restore) == 0 {
			restore = nil
		}
		return remove, restore
	}
	p.RemoveLabels, p.RestoreLabels = decide(n.Labels, before.Labels, labelManagers, false)
	p.RemoveAnnotations, p.RestoreAnnotations = decide(n.Annotations, before.Annotations, annotationManagers, true)
	return p
}

// patch is the merge patch that carries out the plan on node n as it is now: a key someone else has
// written since the plan was made is left to them.
func (p NodeLabelPlan) patch(n *corev1.Node) map[string]any {
	labelManagers, annotationManagers := kube.MetadataManagers(n.ManagedFields)
	build := func(cur map[string]string, remove []string, restore map[string]string, managers map[string][]string) map[string]any {
		out := map[string]any{}
		for _, k := range remove {
			if _, ok := cur[k]; ok && stackWritten(k, managers[k]) {
				out[k] = nil
			}
		}
		for k, v := range restore {
			if c, ok := cur[k]; !ok || (c != v && stackWritten(k, managers[k])) {
				out[k] = v
			}
		}
		return out
	}
	md := map[string]any{}
	if l := build(n.Labels, p.RemoveLabels, p.RestoreLabels, labelManagers); len(l) > 0 {
		md["labels"] = l
	}
	if a := build(n.Annotations, p.RemoveAnnotations, p.RestoreAnnotations, annotationManagers); len(a) > 0 {
		md["annotations"] = a
	}
	if len(md) == 0 {
		return nil
	}
	return map[string]any{"metadata": md}
}
