package step

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// operatorDiagnosis adds what only the operator knows to a failed wait on the GPU stack: the
// ClusterPolicy's state and conditions, and the operator's last log lines where the API has them.
// The hint is for the commonest case: the operator has not recognised any GPU node.
func (x *executor) operatorDiagnosis(ctx context.Context) (detail, hint string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var b strings.Builder
	ns := x.plan.Namespace
	cp, err := x.clients.Dynamic.Resource(health.ClusterPolicyResource()).Get(ctx, plan.ClusterPolicyName, metav1.GetOptions{})
	switch {
	case err != nil:
		fmt.Fprintf(&b, "ClusterPolicy %s: %v\n", plan.ClusterPolicyName, err)
	default:
		state, _, _ := unstructured.NestedString(cp.Object, "status", "state")
		if state == "" {
			state = "no status: the operator has not reconciled it"
		}
		fmt.Fprintf(&b, "ClusterPolicy %s: %s\n", plan.ClusterPolicyName, state)
		conds, _, _ := unstructured.NestedSlice(cp.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["status"] == "True" || m["type"] == "Ready" {
				fmt.Fprintf(&b, "  %v=%v %v: %v\n", m["type"], m["status"], m["reason"], m["message"])
			}
		}
	}
	present, err := x.clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: health.GPUPresentLabel + "=true"})
	if err == nil && len(present.Items) == 0 {
		hint = fmt.Sprintf("the GPU operator has labelled no node %s=true, so it runs no operands: check that it runs and what it logs (kubectl logs -n %s deploy/%s) and the ClusterPolicy's status", health.GPUPresentLabel, ns, plan.OperatorDeployment)
	}
	pods, err := x.clients.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=gpu-operator"})
	if err == nil {
		for _, p := range pods.Items {
			lines := int64(10)
			logs, err := x.clients.Kube.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: &lines}).DoRaw(ctx)
			if err != nil {
				fmt.Fprintf(&b, "operator pod %s: %s on %s; no logs from the API (%v)\n", p.Name, p.Status.Phase, p.Spec.NodeName, shortErr(err))
				continue
			}
			fmt.Fprintf(&b, "operator pod %s, last log lines:\n", p.Name)
			for _, l := range strings.Split(strings.TrimRight(string(logs), "\n"), "\n") {
				fmt.Fprintf(&b, "  %s\n", l)
			}
		}
	}
	return b.String(), hint
}

// shortErr is an error's message cut to 120 characters.
func shortErr(err error) string {
	s := err.Error()
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}
