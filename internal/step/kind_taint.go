package step

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/runner"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// taintKind taints the run's GPU nodes (the plan's, and those NFD labelled since), recording on each
// node which taints gpuctl added (internal/taint), so that uninstall and `gpuctl taint --remove` take
// off only those.
type taintKind struct{}

// Do taints the run's GPU nodes (none known: skipped), counting those that already carry the taint.
func (taintKind) Do(ctx context.Context, x *executor, s *plan.Step, _ func(health.Progress)) (runner.Outcome, error) {
	if len(x.gpuNodes) == 0 {
		return runner.Outcome{Skipped: true, Message: "no GPU nodes"}, nil
	}
	t := corev1.Taint{Key: s.Taint.Key, Value: s.Taint.Value, Effect: corev1.TaintEffect(s.Taint.Effect)}
	res, err := (&taint.Taint{Client: x.clients.Kube, Taint: t}).Run(ctx, x.gpuNodes)
	if err != nil {
		return runner.Outcome{}, err
	}
	added, present := res.Count(taint.ActionAdded), res.Count(taint.ActionAlreadyPresent)
	msg := fmt.Sprintf("%d tainted", added)
	if present > 0 {
		msg += fmt.Sprintf(", %d already were", present)
	}
	return runner.Outcome{Message: msg, Changed: added > 0}, nil
}

// Writes: the nodes the plan names that do not carry the taint yet, and the rule for the GPU nodes NFD
// labels during the run (plan.NodeRuleText: on a fresh kubeadm cluster the dry run knows none yet).
func (taintKind) Writes(ctx context.Context, l *lister, s *plan.Step) error {
	if s.Taint != nil {
		l.w.NodeRule = plan.NodeRuleText
	}
	nodes, err := l.nodeList(ctx)
	if err != nil {
		return err
	}
	if ch := plan.TaintWrites(l.plan, nodes); ch != nil {
		l.w.Nodes = ch
	}
	return nil
}

// State says how many of the run's GPU nodes carry the taint (its key and effect).
func (taintKind) State(ctx context.Context, x *executor, s *plan.Step) (string, error) {
	t := s.Taint
	// One list, not a GET per GPU node.
	nodes, err := x.clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	gpu := map[string]bool{}
	for _, n := range x.gpuNodes {
		gpu[n] = true
	}
	tainted := 0
	for _, node := range nodes.Items {
		if !gpu[node.Name] {
			continue
		}
		for _, nt := range node.Spec.Taints {
			if nt.Key == t.Key && nt.Effect == corev1.TaintEffect(t.Effect) {
				tainted++
				break
			}
		}
	}
	return fmt.Sprintf("%d/%d GPU nodes tainted %s=%s:%s", tainted, len(x.gpuNodes), t.Key, t.Value, t.Effect), nil
}

func (taintKind) Explained() bool { return false }

// Needs: the node patches, and the nodes the safety check and the taint read.
func (taintKind) Needs(*plan.Step, string) []preflight.Access {
	return access("", "", "nodes", "get", "list", "patch")
}

// Recorded: nothing here; each node records the taints gpuctl added to it (internal/taint).
func (taintKind) Recorded(*plan.Step) (Recorded, error) { return Recorded{}, nil }

// Rendered: nothing; a taint is no object.
func (taintKind) Rendered(*plan.Step) Rendered { return Rendered{} }

// Exported: a note either way; a GitOps engine does not change nodes.
func (taintKind) Exported(s *plan.Step) Exported {
	if s.Skip != "" {
		return Exported{Notes: []string{"gpuctl would not taint the GPU nodes here (" + s.Skip + "); where you want the taint, set it in the node pool's configuration or run `gpuctl taint`: a GitOps engine does not change nodes"}}
	}
	t := s.Taint
	return Exported{Notes: []string{fmt.Sprintf("the GPU nodes' taint %s=%s:%s is not exported: a GitOps engine does not change nodes; set it in the node pool's configuration (so new nodes get it), or run `gpuctl taint` once the operator is in", t.Key, t.Value, t.Effect)}}
}
