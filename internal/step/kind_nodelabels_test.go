package step

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/internal/kube/kubetest"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
)

func TestLabelChange(t *testing.T) {
	const key = plan.SharingLabel
	labels := &plan.NodeLabels{Key: key, Nodes: map[string]string{"a-1": "mps-2"}}
	node := func(name, value string, managers ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"x": "y"}}}
		if value != "" {
			n.Labels[key] = value
		}
		for _, m := range managers {
			n.ManagedFields = append(n.ManagedFields, kubetest.ManagedFields(m, []string{key}, nil))
		}
		return n
	}
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name      string
		node      *corev1.Node
		before    record.NodeMetadata
		want      *string
		wantWrite bool
	}{
		{"a planned node without the label gets it", node("a-1", ""), record.NodeMetadata{}, str("mps-2"), true},
		{"a planned node with gpuctl's earlier choice switches", node("a-1", "time-slicing-4", "gpuctl"), record.NodeMetadata{}, str("mps-2"), true},
		{"a planned node someone else labelled is overwritten (uninstall gives their value back)", node("a-1", "theirs", "kubectl-label"), record.NodeMetadata{}, str("mps-2"), true},
		{"a planned node already so is left alone", node("a-1", "mps-2", "gpuctl"), record.NodeMetadata{}, str("mps-2"), false},
		{"gpuctl's label off a node no longer shared goes", node("l-1", "time-slicing-4", "gpuctl"), record.NodeMetadata{}, nil, true},
		{"gpuctl's label gets back the value from before the install", node("l-1", "time-slicing-4", "gpuctl"),
			record.NodeMetadata{Labels: map[string]string{key: "theirs"}}, str("theirs"), true},
		{"a label someone else also wrote stays", node("l-1", "time-slicing-4", "gpuctl", "kubectl-label"), record.NodeMetadata{}, nil, false},
		{"a label only someone else wrote stays", node("l-1", "custom", "kubectl-label"), record.NodeMetadata{}, nil, false},
		{"an unlabelled node that is not planned is left alone", node("l-1", ""), record.NodeMetadata{}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, write := labelChange(tc.node, labels, tc.before)
			if write != tc.wantWrite || (tc.wantWrite && (got == nil) != (tc.want == nil)) || (got != nil && tc.want != nil && *got != *tc.want) {
				t.Errorf("labelChange = %v %v, want %v %v", deref(got), write, deref(tc.want), tc.wantWrite)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<remove>"
	}
	return *s
}

// TestLabelWrites: the writes of a node-labels step, as the run patches them and the dry run lists
// them, node by node; a skipped step writes nothing.
func TestLabelWrites(t *testing.T) {
	const key = plan.SharingLabel
	gpuctls := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "l-1", Labels: map[string]string{key: "time-slicing-4"},
		ManagedFields: []metav1.ManagedFieldsEntry{kubetest.ManagedFields("gpuctl", []string{key}, nil)}}}
	nodes := []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "a-1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "a-2", Labels: map[string]string{key: "mps-2"}}}, gpuctls}
	s := &plan.Step{ID: "sharing-labels", Kind: plan.KindNodeLabels, Labels: &plan.NodeLabels{Key: key, Nodes: map[string]string{"a-1": "mps-2", "a-2": "mps-2"}}}
	got := LabelWrites(nodes, s, map[string]record.NodeMetadata{"l-1": {Labels: map[string]string{key: "theirs"}}})
	want := []plan.LabelWrite{{Step: "sharing-labels", Node: "a-1", Key: key, Value: "mps-2"}, {Step: "sharing-labels", Node: "l-1", Key: key, Value: "theirs"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("LabelWrites = %+v, want %+v", got, want)
	}
	if got := LabelWrites(nil, s, nil); got != nil {
		t.Errorf("with no nodes: %+v", got)
	}
	s.Skip = "nothing to share"
	if got := LabelWrites(nodes, s, nil); got != nil {
		t.Errorf("a skipped step writes %+v", got)
	}
}
