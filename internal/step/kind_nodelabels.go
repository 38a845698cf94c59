package step

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// nodeLabelsKind sets gpuctl's node labels (--sharing: nvidia.com/device-plugin.config per pool;
// --mig: nvidia.com/mig.config).
type nodeLabelsKind struct{}

func (nodeLabelsKind) Do(ctx context.Context, x *executor, s *plan.Step, _ func(health.Progress)) (runner.Outcome, error) {
	return x.nodeLabels(ctx, s)
}

// Writes: the label writes on the nodes as they are now, decided by LabelWrites as the run decides
// them, against the record's labels from before gpuctl's first install.
func (nodeLabelsKind) Writes(ctx context.Context, l *lister, s *plan.Step) error {
	nodes, err := l.nodeList(ctx)
	if err != nil {
		return err
	}
	before, err := l.labelsBefore(ctx)
	if err != nil {
		return err
	}
	l.w.Labels = append(l.w.Labels, LabelWrites(nodes, s, before)...)
	return nil
}

func (nodeLabelsKind) State(ctx context.Context, x *executor, s *plan.Step) (string, error) {
	return x.labelsState(ctx, s.Labels)
}

func (nodeLabelsKind) Explained() bool { return false }

// Needs: the node patches.
func (nodeLabelsKind) Needs(*plan.Step, string) []preflight.Access {
	return access("", "", "nodes", "get", "list", "patch")
}

// Recorded: nothing here; uninstall knows gpuctl's labels by its field manager.
func (nodeLabelsKind) Recorded(*plan.Step) (Recorded, error) { return Recorded{}, nil }
func (nodeLabelsKind) Rendered(*plan.Step) Rendered          { return Rendered{} }

// Exported: nothing; a render holds no node labels, which the render's warnings say (LabelNote), so
// that template prints it too and export carries it as a note.
func (nodeLabelsKind) Exported(*plan.Step) Exported { return Exported{} }

// nodeLabels carries out a KindNodeLabels step: the planned nodes get the label (merge patches under
// gpuctl's field manager, so uninstall knows the label as gpuctl's: uninstall_labels.go); every other
// node whose label only gpuctl wrote (an earlier --sharing choice) gets the value it had before
// gpuctl's first install back, or loses it. A label someone else also wrote there is theirs.
func (x *executor) nodeLabels(ctx context.Context, s *plan.Step) (runner.Outcome, error) {
	nodes, err := x.clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return runner.Outcome{}, fmt.Errorf("list nodes: %w", err)
	}
	var set, reset []string
	for _, w := range LabelWrites(nodes.Items, s, x.labelsBefore) {
		var v any // nil removes the label
		if !w.Remove {
			v = w.Value
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{w.Key: v}}})
		if err != nil {
			return runner.Outcome{}, err
		}
		if _, err := x.clients.Kube.CoreV1().Nodes().Patch(ctx, w.Node, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: kube.FieldManager}); err != nil {
			return runner.Outcome{}, fmt.Errorf("label node %s: %w", w.Node, err)
		}
		if _, planned := s.Labels.Nodes[w.Node]; planned {
			set = append(set, w.Node)
		} else {
			reset = append(reset, w.Node)
		}
	}
	var missing []string
	for name := range s.Labels.Nodes {
		if !slices.ContainsFunc(nodes.Items, func(n corev1.Node) bool { return n.Name == name }) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return runner.Outcome{Changed: len(set)+len(reset) > 0}, fmt.Errorf("label nodes: %s gone since the plan was made", strings.Join(missing, ", "))
	}
	msg := fmt.Sprintf("%d nodes labelled %s", len(set), s.Labels.Key)
	if len(reset) > 0 {
		msg += fmt.Sprintf(", gpuctl's earlier label taken off %d", len(reset))
	}
	if len(set)+len(reset) == 0 {
		msg = "every node already as planned"
	}
	return runner.Outcome{Message: msg, Changed: len(set)+len(reset) > 0}, nil
}

// LabelWrites are the label writes of the node-labels step s on nodes as they are now (before: the
// nodes' stack labels before gpuctl's first install, StackMetadataBefore): what its run patches and,
// being the same function, what the install's dry run lists.
func LabelWrites(nodes []corev1.Node, s *plan.Step, before map[string]record.NodeMetadata) []plan.LabelWrite {
	if s == nil || s.Labels == nil || s.Skip != "" {
		return nil
	}
	var out []plan.LabelWrite
	for i := range nodes {
		n := &nodes[i]
		value, write := labelChange(n, s.Labels, before[n.Name])
		if !write {
			continue
		}
		w := plan.LabelWrite{Step: s.ID, Node: n.Name, Key: s.Labels.Key, Remove: value == nil}
		if value != nil {
			w.Value = *value
		}
		out = append(out, w)
	}
	return out
}

// StackMetadataBefore is the nodes' NFD and operator metadata before gpuctl's stack: the record's
// while it has one of an installed stack, else the nodes' own now (a first install).
func StackMetadataBefore(prev *record.Record, nodes []corev1.Node) map[string]record.NodeMetadata {
	if prev != nil && !prev.Uninstalled {
		return prev.NodeMetadataBefore
	}
	md := map[string]record.NodeMetadata{}
	for i := range nodes {
		if m := record.StackMetadata(&nodes[i]); m != nil {
			md[nodes[i].Name] = *m
		}
	}
	return md
}

// labelChange decides one node's write: the planned value for a planned node; for another node whose
// label gpuctl alone wrote, the value before gpuctl's first install (nil: remove). write is false
// when the node is already so, or the label is not gpuctl's to change.
func labelChange(n *corev1.Node, l *plan.NodeLabels, before record.NodeMetadata) (value *string, write bool) {
	cur, has := n.Labels[l.Key]
	if want, planned := l.Nodes[n.Name]; planned {
		return &want, !has || cur != want
	}
	if !has {
		return nil, false
	}
	managers, _ := kube.MetadataManagers(n.ManagedFields)
	if !slices.Equal(managers[l.Key], []string{kube.FieldManager}) {
		return nil, false
	}
	if was, ok := before.Labels[l.Key]; ok {
		return &was, was != cur
	}
	return nil, true
}

// labelsState says how many of the planned nodes carry their planned label.
func (x *executor) labelsState(ctx context.Context, l *plan.NodeLabels) (string, error) {
	nodes, err := x.clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	done := 0
	for _, n := range nodes.Items {
		if want, ok := l.Nodes[n.Name]; ok && n.Labels[l.Key] == want {
			done++
		}
	}
	return fmt.Sprintf("%d/%d nodes labelled %s as planned", done, len(l.Nodes), l.Key), nil
}

// LabelNote says which node labels a --sharing or --mig step would set, which a render cannot hold:
// by node where the cluster was read, by pool (or every GPU node) where it was not. "" for a step that
// labels nothing.
func LabelNote(s *plan.Step) string {
	if s.Skip != "" || s.Labels == nil || (s.Kind != plan.KindNodeLabels && s.Kind != plan.KindMIGAfterGFD) {
		return ""
	}
	flag := map[string]string{plan.SharingLabel: "--sharing", plan.MIGLabel: "--mig"}[s.Labels.Key]
	byValue := map[string][]string{}
	for node, v := range s.Labels.Nodes {
		byValue[v] = append(byValue[v], node)
	}
	if len(s.Labels.Nodes) == 0 {
		for pool, v := range s.Labels.Pools {
			what := "the GPU nodes of pool " + pool
			if pool == plan.MIGEveryGPUNode {
				what = "every GPU node"
			}
			byValue[v] = append(byValue[v], what)
		}
	}
	if len(byValue) == 0 {
		return ""
	}
	var parts []string
	for _, v := range slices.Sorted(maps.Keys(byValue)) {
		targets := byValue[v]
		slices.Sort(targets)
		if len(s.Labels.Nodes) > 0 {
			targets[0] = "node " + targets[0]
		}
		parts = append(parts, strings.Join(targets, ", ")+" "+s.Labels.Key+"="+v)
	}
	when := ""
	if s.Kind == plan.KindMIGAfterGFD {
		when = " (once GPU Feature Discovery has said their GPUs take it)"
	}
	return fmt.Sprintf("%s: a render holds no node labels: install labels %s%s; set them yourself, in the node pool's configuration so that nodes that join later get them too",
		flag, strings.Join(parts, "; "), when)
}
