package health

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
)

func TestNodesHaveLabel(t *testing.T) {
	kube := fake.NewClientset(testNode("gpu-1", nil), testNode("gpu-2", map[string]string{"nvidia.com/mig.capable": "false"}))
	rec := newRecorder()
	w := &Waiter{Kube: kube, OnProgress: rec.on, DiagnoseTimeout: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := run(ctx, func(ctx context.Context) error {
		return w.NodesHaveLabel(ctx, []string{"gpu-1", "gpu-2"}, "nvidia.com/mig.capable", "GPU nodes labelled by GPU Feature Discovery")
	})
	p := rec.waitForMessage(t, "1/2 GPU nodes labelled by GPU Feature Discovery")
	if len(p.Pending) != 1 || p.Pending[0] != "gpu-1" {
		t.Errorf("pending %v, want the node without the label", p.Pending)
	}
	mutateNode(t, kube, "gpu-1", setLabel("nvidia.com/mig.capable", "true"))
	if err := result(t, errc); err != nil {
		t.Fatalf("NodesHaveLabel() = %v, want nil once both carry the label, whatever its value", err)
	}
}
