package preflight

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuctl/gpuctl/internal/plan"
)

func TestPSA(t *testing.T) {
	ns := func(level string) runtime.Object {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator"}}
		if level != "" {
			n.Labels = map[string]string{psaEnforce: level}
		}
		return n
	}
	tests := []struct {
		name   string
		objs   []runtime.Object
		status Status
		msg    string
	}{
		{"a namespace still to be created passes", nil, StatusPass, "is created with"},
		{"a privileged namespace passes", []runtime.Object{ns("privileged")}, StatusPass, "enforces privileged"},
		{"an unlabelled namespace passes: gpuctl labels it", []runtime.Object{ns("")}, StatusPass, "gpuctl labels it"},
		{"a baseline namespace warns: gpuctl relaxes it", []runtime.Object{ns("baseline")}, StatusWarn, `enforces Pod Security level "baseline"`},
		{"a restricted namespace warns", []runtime.Object{ns("restricted")}, StatusWarn, "relabels it"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv()
			env.Kube, _ = fakeKube(allowAll, tc.objs...)
			expect(t, run(t, "psa", env), tc.status, tc.msg, "")
		})
	}
}

func TestTaintSafety(t *testing.T) {
	controlPlane := map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}
	policy := func(tols ...any) *unstructured.Unstructured {
		return obj("nvidia.com/v1", "ClusterPolicy", "", "cluster-policy", map[string]any{"spec": map[string]any{"daemonsets": map[string]any{"tolerations": tols}}})
	}
	worker := func(tols ...any) *unstructured.Unstructured {
		return obj("apps/v1", "DaemonSet", "gpu-operator", "nfd-worker", map[string]any{"spec": podSpec(tols...)})
	}
	operator := func(tols ...any) *unstructured.Unstructured {
		return obj("apps/v1", "Deployment", "gpu-operator", "gpu-operator", map[string]any{"spec": podSpec(tols...)})
	}
	gpuNodeObj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: map[string]string{"gpu": "yes"}}}
	logAgent := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "logging", Name: "fluent-bit"}}
	gpuOnlyAgent := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "logging", Name: "cpu-only"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeSelector: map[string]string{"gpu": "no"}}}}}
	tolerant := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-proxy"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}}}}

	tests := []struct {
		name    string
		objects []*unstructured.Unstructured
		cluster []runtime.Object
		allGPU  bool
		noTaint bool
		status  Status
		msg     string
	}{
		{"operands and NFD worker tolerating the taint pass", []*unstructured.Unstructured{policy(gpuToleration()), worker(controlPlane, gpuToleration()), operator(controlPlane)},
			nil, false, false, StatusPass, "tolerate nvidia.com/gpu=present:NoSchedule"},
		{"a ClusterPolicy whose tolerations were replaced fails", []*unstructured.Unstructured{policy(controlPlane)},
			nil, false, false, StatusFail, "ClusterPolicy cluster-policy (spec.daemonsets.tolerations"},
		{"a ClusterPolicy without tolerations fails", []*unstructured.Unstructured{obj("nvidia.com/v1", "ClusterPolicy", "", "cluster-policy", nil)},
			nil, false, false, StatusFail, "ClusterPolicy cluster-policy"},
		{"an NFD worker without the toleration fails", []*unstructured.Unstructured{worker(controlPlane)},
			nil, false, false, StatusFail, "DaemonSet gpu-operator/nfd-worker"},
		{"with --no-taint it does not apply", []*unstructured.Unstructured{worker(controlPlane)},
			nil, false, true, StatusSkip, "--no-taint"},
		{"other DaemonSets that would no longer reach GPU nodes warn", nil,
			[]runtime.Object{gpuNodeObj, logAgent, gpuOnlyAgent, tolerant}, false, false, StatusWarn, "DaemonSets that run on GPU nodes but do not tolerate the taint (their running pods stay, new ones will not be scheduled there): logging/fluent-bit"},
		{"an operator that cannot go anywhere when every worker is a GPU node warns", []*unstructured.Unstructured{operator(controlPlane)},
			nil, true, false, StatusWarn, "Deployment gpu-operator/gpu-operator would not tolerate the taint"},
		{"an operator tolerating the taint when every worker is a GPU node passes", []*unstructured.Unstructured{operator(controlPlane, gpuToleration())},
			nil, true, false, StatusPass, "every schedulable worker is a GPU node"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv()
			env.Kube, _ = fakeKube(allowAll, tc.cluster...)
			env.Objects = tc.objects
			env.Plan = testPlan(nil, tc.noTaint)
			if tc.allGPU {
				env.Detection.Scheduling = testDetection().Scheduling
				env.Detection.Scheduling.AllWorkersGPU = true
				env.Detection.Scheduling.OpenWorkers = nil
				env.Detection.Scheduling.ControlPlaneNodes = nil
			}
			expect(t, run(t, "taint-safety", env), tc.status, tc.msg, "")
		})
	}

	t.Run("GPU nodes already tainted are not counted against other DaemonSets", func(t *testing.T) {
		env := testEnv()
		env.Kube, _ = fakeKube(allowAll, gpuNodeObj, logAgent)
		env.Detection.GPUNodes[0].Tainted = true
		expect(t, run(t, "taint-safety", env), StatusPass, "", "")
	})
}

// TestTaintSafetyStrandedWorkloads: workloads the plan says the taint would strand fail the check, with
// the ways out; workloads it only moves pass.
func TestTaintSafetyStrandedWorkloads(t *testing.T) {
	tests := []struct {
		name      string
		workloads []plan.TaintWorkload
		status    Status
		msg       string
	}{
		{"a Deployment pinned to GPU nodes is refused", []plan.TaintWorkload{
			{Kind: "Deployment", Namespace: "web", Name: "shop", Effect: "its new pods go to nodes without GPUs"},
			{Kind: "Deployment", Namespace: "web", Name: "pinned", Effect: "no schedulable node without GPUs fits its pods", Stranded: true},
		}, StatusFail, "would strand Deployment web/pinned (no schedulable node without GPUs fits its pods)"},
		{"workloads that only move pass", []plan.TaintWorkload{
			{Kind: "Deployment", Namespace: "web", Name: "shop", Effect: "its new pods go to nodes without GPUs"},
		}, StatusPass, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv()
			env.Kube, _ = fakeKube(allowAll)
			env.Plan = testPlan(nil, false)
			env.Plan.Step("taint").Taint = &plan.Taint{Key: plan.TaintKey, Workloads: tc.workloads}
			r := run(t, "taint-safety", env)
			expect(t, r, tc.status, tc.msg, "")
			if tc.status == StatusFail && (!strings.Contains(r.Hint, "--no-taint") || !strings.Contains(r.Hint, "nvidia.com/gpu")) {
				t.Errorf("hint %q names no way out", r.Hint)
			}
		})
	}

	t.Run("a taint the plan skips says why", func(t *testing.T) {
		env := testEnv()
		env.Plan = testPlan(nil, false)
		env.Plan.Step("taint").Skip = "every schedulable node is a GPU node, …; --taint taints them anyway"
		expect(t, run(t, "taint-safety", env), StatusSkip, "every schedulable node is a GPU node", "")
	})
}
