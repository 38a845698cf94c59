package taint

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestApply(t *testing.T) {
	notReady := corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}
	recorded := func(n *corev1.Node) *corev1.Node {
		n.Annotations = map[string]string{AddedTaintsAnnotation: `[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}]`}
		return n
	}
	tests := []struct {
		name    string
		read    *corev1.Node // the node as the plan read it
		untaint bool
		// meanwhile changes the node between the plan and the write (nil: nothing does).
		meanwhile  func(*corev1.Node)
		wantAction Action
		wantTaints []corev1.Taint
	}{
		{name: "taint: the planned taint is added and nothing else changes", read: node("gpu-1", userTaint),
			wantAction: ActionAdded, wantTaints: []corev1.Taint{userTaint, GPUTaint}},
		{name: "taint: a not-ready taint that came meanwhile leaves the planned change as it was: written, theirs kept", read: node("gpu-1"),
			meanwhile:  func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{notReady} },
			wantAction: ActionAdded, wantTaints: []corev1.Taint{notReady, GPUTaint}},
		{name: "taint: someone tainted the node meanwhile: reported, not written", read: node("gpu-1"),
			meanwhile:  func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{gkeTaint} },
			wantAction: ActionChanged, wantTaints: []corev1.Taint{gkeTaint}},
		{name: "untaint: the recorded taint goes, the user's stays", read: recorded(node("gpu-1", userTaint, GPUTaint)), untaint: true,
			wantAction: ActionRemoved, wantTaints: []corev1.Taint{userTaint}},
		{name: "untaint: someone changed the record meanwhile: reported, not written", read: recorded(node("gpu-1", GPUTaint)), untaint: true,
			meanwhile:  func(n *corev1.Node) { n.Annotations[AddedTaintsAnnotation] = `[]` },
			wantAction: ActionChanged, wantTaints: []corev1.Taint{GPUTaint}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(tc.read.DeepCopy(), node("other-1"))
			if tc.meanwhile != nil {
				onFirstPatch(t, c, tc.meanwhile)
			}
			res, err := (&Apply{Client: c}).Run(context.Background(), []Planned{{Node: tc.read, Taint: GPUTaint, Untaint: tc.untaint}})
			if got := actions(res)["gpu-1"]; got != tc.wantAction {
				t.Errorf("action %s, want %s (err %v)", got, tc.wantAction, err)
			}
			var changed *ChangedError
			if (tc.wantAction == ActionChanged) != errors.As(err, &changed) {
				t.Errorf("err = %v", err)
			}
			assertTaints(t, c, "gpu-1", tc.wantTaints...)
			for _, a := range c.Actions() {
				if a.GetVerb() == "patch" && a.(interface{ GetName() string }).GetName() != "gpu-1" {
					t.Errorf("patched a node outside the plan: %s", a.(interface{ GetName() string }).GetName())
				}
			}
		})
	}

	t.Run("a planned node that is gone is reported, not created", func(t *testing.T) {
		c := fake.NewClientset()
		res, err := (&Apply{Client: c}).Run(context.Background(), []Planned{{Node: node("gpu-1"), Taint: GPUTaint}})
		if got := actions(res)["gpu-1"]; got != ActionChanged || err == nil {
			t.Errorf("action %s, err %v", got, err)
		}
		if _, err := c.CoreV1().Nodes().Get(context.Background(), "gpu-1", metav1.GetOptions{}); err == nil {
			t.Error("the node exists")
		}
	})
}
