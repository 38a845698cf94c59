package preflight

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// psaEnforce is the Pod Security Admission label that decides which pods a namespace admits.
const psaEnforce = "pod-security.kubernetes.io/enforce"

// checkPSA: the install namespace admits privileged pods. The driver, toolkit and validator are
// privileged DaemonSets with hostPath and host PID (NVIDIA/gpu-operator#314); gpuctl labels the namespace
// enforce=privileged, so a stricter label on an existing namespace is relaxed, which is worth saying.
func checkPSA(ctx context.Context, env *Env) Result {
	if env.Namespace == "" || env.Kube == nil {
		return skip("does not apply: no install namespace")
	}
	ns, err := env.Kube.CoreV1().Namespaces().Get(ctx, env.Namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return pass("namespace " + env.Namespace + " is created with " + psaEnforce + "=privileged")
	case err != nil:
		return warn("could not read namespace "+env.Namespace+": "+err.Error(),
			"gpuctl labels it "+psaEnforce+"=privileged when it applies the namespace")
	}
	level := ns.Labels[psaEnforce]
	switch level {
	case "privileged":
		return pass("namespace " + env.Namespace + " enforces privileged")
	case "":
		return pass("namespace " + env.Namespace + " exists; gpuctl labels it " + psaEnforce + "=privileged")
	}
	return warn(fmt.Sprintf("namespace %s enforces Pod Security level %q, which rejects the GPU operator's privileged DaemonSets: gpuctl relabels it %s=privileged, which relaxes it for everything else in it too", env.Namespace, level, psaEnforce),
		"if other workloads share the namespace, install into one of its own with -n")
}

// checkTaintSafety: the GPU taint keeps nothing gpuctl installs off the nodes it must run on. The
// operands (through the ClusterPolicy's daemonsets.tolerations) and the NFD worker must tolerate it;
// a values override that replaces those lists without it would leave the GPUs unusable. The operator
// and NFD master/gc Deployments need it only when every schedulable worker is a GPU node
// (NVIDIA/gpu-operator deployments/gpu-operator/templates/operator.yaml@v26.7.0; NVIDIA/gpu-operator
// deployments/gpu-operator/values.yaml@v26.7.0). DaemonSets of others that run on GPU nodes without tolerating it are
// reported: their new pods stay off GPU nodes.
func checkTaintSafety(ctx context.Context, env *Env) Result {
	if r, ok := needDetection(env); !ok {
		return r
	}
	if r, ok := needPlan(env); !ok {
		return r
	}
	if !tainting(env.Plan) {
		reason := "--no-taint"
		if ts := env.Plan.Step("taint"); ts != nil && ts.Skip != "" {
			reason = ts.Skip
		}
		return skip("does not apply: GPU nodes are not tainted (" + reason + ")")
	}
	// Workloads running today that the taint would strand (plan.DecideTaint): refused before anything
	// is written, with the ways out.
	if ts := env.Plan.Step("taint"); ts != nil && ts.Taint != nil && slices.ContainsFunc(ts.Taint.Workloads, func(w plan.TaintWorkload) bool { return w.Stranded }) {
		return fail(plan.StrandedMessage(ts.Taint.Workloads), plan.StrandedHint)
	}
	gpuTaint := taint.GPUTaint
	taintText := fmt.Sprintf("%s=%s:%s", plan.TaintKey, plan.TaintValue, plan.TaintEffect)
	blocked, stranded, ours := untolerating(env, gpuTaint)
	if len(blocked) > 0 {
		return fail(fmt.Sprintf("these would not tolerate %s, so they could not run on the tainted GPU nodes: %s", taintText, strings.Join(blocked, "; ")),
			"add {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule} to those tolerations (a value replaces the chart's default list), or install with --no-taint")
	}

	var lines []string
	if len(stranded) > 0 {
		lines = append(lines, fmt.Sprintf("every schedulable worker is a GPU node and there is no control plane node to use, but %s would not tolerate the taint and would stay Pending", strings.Join(stranded, ", ")))
	}
	others, err := strandedDaemonSets(ctx, env, ours, gpuTaint)
	if err != nil {
		lines = append(lines, "could not list DaemonSets to see which would no longer reach GPU nodes: "+err.Error())
	} else if len(others) > 0 {
		lines = append(lines, "DaemonSets that run on GPU nodes but do not tolerate the taint (their running pods stay, new ones will not be scheduled there): "+listNames(others))
	}
	if len(lines) > 0 {
		return warn(strings.Join(lines, "\n"),
			"add a toleration for nvidia.com/gpu to what must run on GPU nodes (log and monitoring agents, CNI), or install with --no-taint")
	}
	if env.Detection.Scheduling.AllWorkersGPU {
		return pass("every schedulable worker is a GPU node: the operator and NFD master/gc tolerate " + taintText)
	}
	return pass("the GPU DaemonSets tolerate " + taintText)
}

// untolerating judges the objects the install writes against the GPU taint: blocked are gpuctl's GPU
// DaemonSets (and the ClusterPolicy's operand tolerations) that would not tolerate it; stranded are
// its Deployments that would have nowhere to run where every schedulable worker is a GPU node and
// there is no control plane node. ours are the objects by "Kind/namespace/name".
func untolerating(env *Env, gpuTaint corev1.Taint) (blocked, stranded []string, ours map[string]bool) {
	ours = map[string]bool{}
	for _, o := range env.Objects {
		kind := o.GetKind()
		ours[kind+"/"+namespaceOf(o, env.Namespace)+"/"+o.GetName()] = true
		switch {
		case kind == "ClusterPolicy":
			raw, found, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "daemonsets", "tolerations")
			if !tolerates(raw, found, gpuTaint) {
				blocked = append(blocked, "ClusterPolicy "+o.GetName()+" (spec.daemonsets.tolerations: every operand DaemonSet)")
			}
		case kind == "DaemonSet":
			raw, found, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "template", "spec", "tolerations")
			if !tolerates(raw, found, gpuTaint) {
				blocked = append(blocked, "DaemonSet "+namespaceOf(o, env.Namespace)+"/"+o.GetName())
			}
		case kind == "Deployment" && env.Detection.Scheduling.AllWorkersGPU && len(env.Detection.Scheduling.ControlPlaneNodes) == 0:
			raw, found, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "template", "spec", "tolerations")
			if !tolerates(raw, found, gpuTaint) {
				stranded = append(stranded, "Deployment "+namespaceOf(o, env.Namespace)+"/"+o.GetName())
			}
		}
	}
	return blocked, stranded, ours
}

// tolerates reads a tolerations list from an object and matches it against the taint; an absent list
// tolerates nothing.
func tolerates(raw any, found bool, t corev1.Taint) bool {
	if !found {
		return false
	}
	var tols []corev1.Toleration
	if err := convert(raw, &tols); err != nil {
		return false
	}
	return taint.Tolerates(tols, t)
}

// strandedDaemonSets are the DaemonSets not in the install whose node selector picks a GPU node that
// is not tainted yet, and that do not tolerate the taint.
func strandedDaemonSets(ctx context.Context, env *Env, ours map[string]bool, t corev1.Taint) ([]string, error) {
	untainted := map[string]bool{}
	for _, n := range env.Detection.GPUNodes {
		if !n.Tainted {
			untainted[n.Name] = true
		}
	}
	if len(untainted) == 0 || env.Kube == nil {
		return nil, nil
	}
	nodes, err := env.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var gpuNodes []corev1.Node
	for _, n := range nodes.Items {
		if untainted[n.Name] {
			gpuNodes = append(gpuNodes, n)
		}
	}
	dss, err := env.Kube.AppsV1().DaemonSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var others []appsv1.DaemonSet
	for _, d := range dss.Items {
		if !ours["DaemonSet/"+d.Namespace+"/"+d.Name] && (len(d.OwnerReferences) == 0 || d.OwnerReferences[0].Kind != "ClusterPolicy") {
			others = append(others, d)
		}
	}
	return taint.Stranded(others, gpuNodes, t), nil
}
