package runner

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/taint"
)

func (u *Uninstaller) untaint(ctx context.Context, _ func(string)) (Outcome, error) {
	res, err := (&taint.Untaint{Client: u.Clients.Kube}).Run(ctx, nil)
	if err != nil {
		return Outcome{}, err
	}
	n := res.Changed()
	if n == 0 {
		return Outcome{Skipped: true, Message: "no node carries a taint gpuctl added"}, nil
	}
	return Outcome{Changed: true, Message: fmt.Sprintf("%d nodes untainted", n)}, nil
}

// nodeMetadata carries out the plan's rule for node labels and annotations on every node as it is
// now. The plan lists the keys as they were when it was made, but the operator writes labels until
// its release is gone (a node's driver upgrade state, a node that joined meanwhile), so the same
// judgement (planNodeMetadata: who wrote each key) is made again here, after the operator stopped.
func (u *Uninstaller) nodeMetadata(ctx context.Context, _ func(string)) (Outcome, error) {
	nfd := u.ours(plan.NFDRelease, "nfd-operator")
	operator := u.ours(plan.OperatorRelease, plan.OperatorPackage)
	if !nfd && !operator {
		return Outcome{Skipped: true, Message: "gpuctl installed neither NFD nor the operator"}, nil
	}
	var before map[string]record.NodeMetadata
	if u.Record != nil {
		before = u.Record.NodeMetadataBefore
	}
	nodes, err := u.Clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return Outcome{}, fmt.Errorf("list nodes: %w", err)
	}
	changed, kept := 0, 0
	for i := range nodes.Items {
		n := &nodes.Items[i]
		np := planNodeMetadata(n, before[n.Name], nfd, operator)
		kept += len(np.Kept)
		patch := np.patch(n)
		if patch == nil {
			continue
		}
		data, err := json.Marshal(patch)
		if err != nil {
			return Outcome{}, err
		}
		if _, err := u.Clients.Kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, data, metav1.PatchOptions{FieldManager: kube.FieldManager}); err != nil {
			return Outcome{}, fmt.Errorf("node %s: %w", n.Name, err)
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
	return Outcome{Changed: changed > 0, Skipped: changed == 0, Message: msg}, nil
}
