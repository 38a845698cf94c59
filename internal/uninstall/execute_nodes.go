package uninstall

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/runner"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// untaint removes the taints gpuctl added, as its record on each node (gpuctl.io/added-taints) says.
func (e *execution) untaint(ctx context.Context, _ func(string)) (runner.Outcome, error) {
	res, err := (&taint.Untaint{Client: e.Clients.Kube}).Run(ctx, nil)
	if err != nil {
		return runner.Outcome{}, err
	}
	n := res.Changed()
	if n == 0 {
		return runner.Outcome{Skipped: true, Message: "no node carries a taint gpuctl added"}, nil
	}
	return runner.Outcome{Changed: true, Message: fmt.Sprintf("%d nodes untainted", n)}, nil
}

// nodeMetadata carries out the plan's rule for node labels and annotations on every node as it is
// now. The plan lists the keys as they were when it was made, but the operator writes labels until
// its release is gone (a node's driver upgrade state, a node that joined meanwhile), so the same
// judgement (planNodeMetadata: who wrote each key) is made again here, after the operator stopped.
func (e *execution) nodeMetadata(ctx context.Context, _ func(string)) (runner.Outcome, error) {
	if !e.p.nfd && !e.p.operator {
		return runner.Outcome{Skipped: true, Message: "gpuctl installed neither NFD nor the operator"}, nil
	}
	before := metadataBefore(e.p.record)
	nodes, err := e.Clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return runner.Outcome{}, fmt.Errorf("list nodes: %w", err)
	}
	changed, kept := 0, 0
	for i := range nodes.Items {
		n := &nodes.Items[i]
		np := planNodeMetadata(n, before[n.Name], e.p.nfd, e.p.operator)
		kept += len(np.Kept)
		patch := np.patch(n)
		if patch == nil {
			continue
		}
		data, err := json.Marshal(patch)
		if err != nil {
			return runner.Outcome{}, err
		}
		if _, err := e.Clients.Kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, data, metav1.PatchOptions{FieldManager: kube.FieldManager}); err != nil {
			return runner.Outcome{}, fmt.Errorf("node %s: %w", n.Name, err)
		}
		changed++
	}
	msg := fmt.Sprintf("%d nodes back to their labels before the install", changed)
	if changed == 0 {
		msg = "no labels to remove"
	}
	if kept > 0 {
		msg += fmt.Sprintf("; kept %d labels and annotations in the stack's prefixes that others wrote", kept)
	}
	return runner.Outcome{Changed: changed > 0, Skipped: changed == 0, Message: msg}, nil
}
