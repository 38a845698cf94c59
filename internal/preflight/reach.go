package preflight

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// TolerateFlag is the install flag that adds tolerations for the GPU nodes' own taints.
const TolerateFlag = "--tolerate-existing-taints"

// checkGPUNodeTaints: gpuctl's DaemonSets reach every GPU node. A GPU node with a taint the NFD worker
// does not tolerate is never labelled, so the operator never deploys to it; one the operands'
// daemonsets.tolerations do not tolerate gets no driver, device plugin or validator. Either way the
// install would report success for the nodes it reached and silently skip that one. The tolerations
// judged are the rendered NFD worker DaemonSet's and ClusterPolicy's, so -f, --set and
// --tolerate-existing-taints all count.
func checkGPUNodeTaints(_ context.Context, env *Env) Result {
	if r, ok := needDetection(env); !ok {
		return r
	}
	if r, ok := needPlan(env); !ok {
		return r
	}
	type component struct {
		what string
		tols []corev1.Toleration
	}
	var comps []component
	for _, o := range env.Objects {
		switch o.GetKind() {
		case "ClusterPolicy":
			raw, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "daemonsets", "tolerations")
			var tols []corev1.Toleration
			_ = convert(raw, &tols)
			comps = append(comps, component{"the GPU operator's operands (daemonsets.tolerations)", tols})
		case "DaemonSet":
			var ds appsv1.DaemonSet
			if convert(o.Object, &ds) != nil || detect.Classify(detect.WorkloadFromDaemonSet(&ds)) != detect.ComponentNFDWorker {
				continue
			}
			comps = append(comps, component{"the NFD worker (node-feature-discovery.worker.tolerations)", ds.Spec.Template.Spec.Tolerations})
		}
	}
	if len(comps) == 0 {
		return skip("does not apply: the install renders neither the NFD worker nor a ClusterPolicy")
	}
	byTaint := map[string][]string{}
	var order []string
	for _, c := range comps {
		for _, nt := range plan.Untolerated(env.Detection.GPUNodes, c.tols) {
			key := nt.String()
			if _, ok := byTaint[key]; !ok {
				order = append(order, key)
			}
			byTaint[key] = append(byTaint[key], c.what)
		}
	}
	if len(order) == 0 {
		return pass(fmt.Sprintf("the NFD worker and the operands tolerate the taints of all %d GPU nodes", len(env.Detection.GPUNodes)))
	}
	var lines []string
	for _, k := range order {
		node, taint, _ := strings.Cut(k, " ")
		lines = append(lines, fmt.Sprintf("GPU node %s has taint %s, which %s do not tolerate", node, taint, strings.Join(byTaint[k], " and ")))
	}
	return fail(strings.Join(lines, "\n")+"\nNFD would never label such a node, or the operator never deploy its driver, device plugin and validator there, and the install would skip it",
		"install with "+TolerateFlag+" to add tolerations for exactly these taints, or add them to daemonsets.tolerations and node-feature-discovery.worker.tolerations with -f (a list replaces the chart's default), or remove the taint")
}
