package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
)

func TestEvaluateStatus(t *testing.T) {
	available := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator"},
		Status: appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1, Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}}
	policy := func(state, reason string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"state": state,
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": reason}}}}}
	}
	gpuNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: map[string]string{
		"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "8", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}
	cpuNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-1"}}
	readyPod := func(app string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: app + "-x", Labels: map[string]string{"app": app}},
			Spec:   corev1.PodSpec{NodeName: "gpu-1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	healthy := statusInputs{namespace: "gpu-operator", policyName: "cluster-policy", operator: available, policy: policy("ready", "Reconciled"),
		nodes: []corev1.Node{*gpuNode, *cpuNode}, pods: []corev1.Pod{readyPod(validatorApp), readyPod(devicePluginApp), readyPod(toolkitApp)}}

	t.Run("a stack with every check passing is healthy, and its GPU node row reads GFD's labels", func(t *testing.T) {
		res := evaluateStatus(healthy)
		if !res.Healthy {
			t.Fatalf("not healthy: %+v", res.Checks)
		}
		if len(res.Nodes) != 1 {
			t.Fatalf("rows %+v", res.Nodes)
		}
		n := res.Nodes[0]
		if !n.Validated || n.GPUs != 8 || n.Product != "NVIDIA-H100-80GB-HBM3" || n.Allocatable != 8 || !n.Tainted ||
			n.Driver != "-" || n.Toolkit != "Ready" || n.DevicePlugin != "Ready" {
			t.Errorf("row %+v", n)
		}
	})
	t.Run("a GPU node without a Ready validator makes the stack not ready", func(t *testing.T) {
		in := healthy
		in.pods = []corev1.Pod{readyPod(devicePluginApp)}
		res := evaluateStatus(in)
		if res.Healthy || res.Nodes[0].Validated {
			t.Errorf("healthy %v, row %+v", res.Healthy, res.Nodes[0])
		}
		if !hasFailed(res, "gpu nodes", "gpu-1") {
			t.Errorf("checks %+v", res.Checks)
		}
	})
	t.Run("a ClusterPolicy ready for want of GPU nodes is not healthy", func(t *testing.T) {
		in := healthy
		in.policy = policy("ready", "NoGPUNodes")
		if res := evaluateStatus(in); res.Healthy || !hasFailed(res, "clusterpolicy", "NoGPUNodes") {
			t.Errorf("checks %+v", res.Checks)
		}
	})
	t.Run("a missing operator Deployment fails its check", func(t *testing.T) {
		in := healthy
		in.operator = nil
		if res := evaluateStatus(in); res.Healthy || !hasFailed(res, "operator", "not found") {
			t.Errorf("checks %+v", res.Checks)
		}
	})
}

func hasFailed(res *StatusResult, name, text string) bool {
	for _, c := range res.Checks {
		if c.Name == name && c.State == CheckFailed && strings.Contains(c.Message, text) {
			return true
		}
	}
	return false
}

// TestOperatorCheckAgreesWithInstallWait: status's operator check and install's wait for the operator
// Deployment (health.Waiter.DeploymentAvailable) give one verdict for every Deployment, so `gpuctl status`
// never calls available what install would still wait for, nor the reverse.
func TestOperatorCheckAgreesWithInstallWait(t *testing.T) {
	operator := func(replicas, current, updated, available int32, cond corev1.ConditionStatus, edit func(*appsv1.Deployment)) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator", Namespace: "gpu-operator", Generation: 2},
			Spec: appsv1.DeploymentSpec{Replicas: &replicas},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: current, UpdatedReplicas: updated,
				ReadyReplicas: available, AvailableReplicas: available}}
		if cond != "" {
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: cond}}
		}
		if edit != nil {
			edit(d)
		}
		return d
	}
	tests := []struct {
		name          string
		d             *appsv1.Deployment
		wantAvailable bool
	}{
		{"one updated replica, available and Available", operator(1, 1, 1, 1, corev1.ConditionTrue, nil), true},
		{"an upgrade whose old replica still serves is not yet available at the new spec",
			operator(1, 2, 1, 1, corev1.ConditionTrue, nil), false},
		{"a new spec the controller has not observed is not available",
			operator(1, 1, 1, 1, corev1.ConditionTrue, func(d *appsv1.Deployment) { d.Generation = 3 }), false},
		{"a Deployment scaled to zero runs no operator, though Kubernetes calls it Available",
			operator(0, 0, 0, 0, corev1.ConditionTrue, nil), false},
		{"Available with no replica available (maxUnavailable allows it) is not available",
			operator(1, 1, 1, 0, corev1.ConditionTrue, nil), false},
		{"available replicas without the Available condition are not available",
			operator(1, 1, 1, 1, corev1.ConditionFalse, nil), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := statusInputs{namespace: "gpu-operator", operator: tt.d}
			var check StatusCheck
			for _, c := range evaluateStatus(in).Checks {
				if c.Name == "operator" {
					check = c
				}
			}
			if got := check.State == CheckOK; got != tt.wantAvailable {
				t.Errorf("status's operator check %+v: available %v, want %v", check, got, tt.wantAvailable)
			}
			if got := installWaitDone(t, tt.d); got != tt.wantAvailable {
				t.Errorf("install's wait done %v, want %v", got, tt.wantAvailable)
			}
		})
	}
}

// installWaitDone runs install's wait for d once, on a fake clientset that holds d: the wait evaluates
// after its first list, reports that verdict's progress, and either returns (done) or sees the context
// cancelled in that report and stops. No clock decides it.
func installWaitDone(t *testing.T, d *appsv1.Deployment) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &health.Waiter{Kube: fake.NewClientset(d), DiagnoseTimeout: -1, OnProgress: func(health.Progress) { cancel() }}
	err := w.DeploymentAvailable(ctx, d.Namespace, d.Name)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("wait: %v", err)
	}
	return err == nil
}

func TestStatusChecks(t *testing.T) {
	policy := func(status map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"status": status}}
	}
	row := func(name string, validated bool, allocatable int64) NodeStatus {
		return NodeStatus{Name: name, Validated: validated, Allocatable: allocatable}
	}
	fluxOwned := &release.OwnedError{Object: "release gpu-operator/gpu-operator", Owner: release.Owner{Engine: "Flux", Kind: "HelmRelease", Namespace: "flux-system", Name: "gpu-operator"}}
	argoOwned := &release.OwnedError{Object: "release gpu-operator/gpu-operator", Owner: release.Owner{Engine: "Argo CD", Kind: "Application", Namespace: "argocd", Name: "gpu"}}
	tests := []struct {
		name      string
		check     StatusCheck
		wantName  string
		wantState CheckState
		wantText  string
	}{
		{"a succeeded install's record is ok", recordCheck(&record.Record{OperatorVersion: "v26.7.0", Result: "succeeded"}, nil),
			"install record", CheckOK, "GPU Operator v26.7.0"},
		{"a failed install's record is a warning", recordCheck(&record.Record{Result: "failed"}, nil), "install record", CheckWarning, "failed"},
		{"no record is a warning, not a failure", recordCheck(nil, nil), "install record", CheckWarning, "none"},
		{"no record, and a release Flux manages, names the HelmRelease", recordCheck(nil, fluxOwned), "install record", CheckOK, "none: release gpu-operator/gpu-operator is managed by Flux HelmRelease flux-system/gpu-operator"},
		{"a record, and a release Argo CD took over, names the Application", recordCheck(&record.Record{Result: "succeeded"}, argoOwned), "install record", CheckOK, "release gpu-operator/gpu-operator is managed by Argo CD Application argocd/gpu"},
		{"a missing NFD release fails", nfdCheck(nil, "gpu-operator"), "node feature discovery", CheckFailed, "not found"},
		{"an NFD release left pending fails with its status", nfdCheck(&release.Release{Name: "node-feature-discovery", Revision: 2, Status: "pending-upgrade"}, "gpu-operator"),
			"node feature discovery", CheckFailed, "revision 2 is pending-upgrade"},
		{"a deployed NFD release is ok", nfdCheck(&release.Release{Name: "node-feature-discovery", Revision: 1, Status: "deployed", AppVersion: "v0.18.3"}, "gpu-operator"),
			"node feature discovery", CheckOK, "(v0.18.3)"},
		{"a missing ClusterPolicy fails", policyCheck(nil, "cluster-policy"), "clusterpolicy", CheckFailed, "not found"},
		{"a ClusterPolicy without status says the operator has not reported", policyCheck(policy(nil), "cluster-policy"),
			"clusterpolicy", CheckFailed, "state none (the operator has not reported)"},
		{"a ClusterPolicy not ready shows the Ready condition's message", policyCheck(policy(map[string]any{"state": "notReady",
			"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "OperandNotReady", "message": "driver not ready"}}}), "cluster-policy"),
			"clusterpolicy", CheckFailed, "state notReady (OperandNotReady: driver not ready)"},
		{"no GPU node fails", gpuNodesCheck(nil, "gpu-operator"), "gpu nodes", CheckFailed, "no node is labelled"},
		{"every GPU node validated is ok", gpuNodesCheck([]NodeStatus{row("a", true, 1), row("b", true, 1)}, "gpu-operator"), "gpu nodes", CheckOK, "2/2"},
		{"a GPU node without GPUs allocatable fails", allocatableCheck([]NodeStatus{row("a", true, 8), row("b", true, 0)}), "allocatable", CheckFailed, "on 1/2 GPU nodes"},
		{"GPUs allocatable on every GPU node is ok", allocatableCheck([]NodeStatus{row("a", true, 8)}), "allocatable", CheckOK, "on 1/1 GPU nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.check
			if c.Name != tt.wantName || c.State != tt.wantState || !strings.Contains(c.Message, tt.wantText) {
				t.Errorf("check %+v, want %s %s with %q", c, tt.wantName, tt.wantState, tt.wantText)
			}
			if c.State == CheckFailed && c.Hint == "" {
				t.Errorf("check %+v has no hint", c)
			}
		})
	}
}

func TestStatusTarget(t *testing.T) {
	s := &Status{Clients: &kube.Clients{Namespace: "from-flag"}}
	tests := []struct {
		name       string
		rec        *record.Record
		wantNS     string
		wantPolicy string
	}{
		{"without a record: the -n namespace and the charts' ClusterPolicy", nil, "from-flag", plan.ClusterPolicyName},
		{"a record's namespace wins", &record.Record{Namespace: "gpu", Distribution: "kubeadm"}, "gpu", plan.ClusterPolicyName},
		{"on OpenShift the OperatorHub ClusterPolicy", &record.Record{Namespace: "nvidia-gpu-operator", Distribution: "openshift"}, "nvidia-gpu-operator", plan.OpenShiftPolicyName},
		{"an uninstalled record is no record", &record.Record{Namespace: "gpu", Distribution: "openshift", Uninstalled: true}, "from-flag", plan.ClusterPolicyName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if ns, policy := s.target(tt.rec); ns != tt.wantNS || policy != tt.wantPolicy {
				t.Errorf("target() = %s, %s; want %s, %s", ns, policy, tt.wantNS, tt.wantPolicy)
			}
		})
	}
}
