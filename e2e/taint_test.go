package e2e

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// TestTaintStrandsNothing (gpuctl issue 21): after a default gpuctl install, a plain Deployment runs
// where every schedulable node is a GPU node (kubeadm with GPU workers only, a single-node k3s box whose
// server has the GPU): gpuctl does not taint there. Where it taints (kubeadm with a CPU worker, no
// ExtendedResourceToleration, as upstream Kubernetes), a GPU pod written as tutorials write it, with no
// toleration, still gets scheduled: gpuctl's MutatingAdmissionPolicy adds the toleration, and uninstall
// removes it with the operator release. A workload the taint would strand stops the install before its
// first write, with exit 5.
func TestTaintStrandsNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		scenario sandbox.Scenario
	}{
		{"kubeadm with GPU workers and no CPU worker", sandbox.Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 0}},
		{"a single-node k3s box whose server is the GPU node", sandbox.Scenario{Distro: "k3s", GPUControlPlane: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := sandbox.StartT(t, sandbox.Options{Scenario: tc.scenario})
			res, _ := installJSON(t, c)
			if s := res.Plan.Step("taint"); s.Skip == "" && !stepSkipped(res, "taint") {
				t.Errorf("the taint step ran: %+v", s)
			}
			for node, taints := range taintsByNode(t, c) {
				if slices.ContainsFunc(taints, func(tn corev1.Taint) bool { return tn.Key == plan.TaintKey }) {
					t.Errorf("node %s is tainted %v", node, taints)
				}
			}
			t.Run("a plain Deployment created after the install runs", func(t *testing.T) {
				createDeployment(t, c, "web", corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}})
				waitPodsReady(t, c, "default", "app=web", 1)
			})
			t.Run("a second install changes nothing", func(t *testing.T) {
				assertRerunChangesNothing(t, c, nil)
			})
		})
	}

	t.Run("kubeadm with a CPU worker", func(t *testing.T) {
		// NFD's labels are there before the install (someone's NFD ran), so detection knows the GPU nodes
		// and preflight can judge the taint before the first write.
		c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 1, NFDLabels: true}})
		ctx := t.Context()
		gpuNodes := simulatedGPUNodes(c)

		t.Run("a Deployment the taint would strand stops the install before its first write, exit 5", func(t *testing.T) {
			pinned := createDeployment(t, c, "pinned", corev1.PodSpec{
				NodeSelector: map[string]string{"feature.node.kubernetes.io/pci-10de.present": "true"},
				Containers:   []corev1.Container{{Name: "pinned", Image: "nginx"}},
			})
			waitPodsReady(t, c, "default", "app=pinned", 1)
			before := clusterState(t, c)
			code, _, stderr := gpuctl(t, c, "install")
			if code != cli.ExitPreflight {
				t.Errorf("install exited %d, want %d:\n%s", code, cli.ExitPreflight, stderr)
			}
			for _, want := range []string{"Deployment default/pinned", "--no-taint", "nvidia.com/gpu"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr does not name %q:\n%s", want, stderr)
				}
			}
			assertUnchanged(t, before, clusterState(t, c))
			if err := c.Kube.AppsV1().Deployments("default").Delete(ctx, pinned.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		})

		res, _ := installJSON(t, c)
		t.Run("the plan names the policy, and the taint follows it", func(t *testing.T) {
			if tn := res.Plan.Step("taint"); tn.Skip != "" || tn.Taint.Toleration != plan.TolerationPolicy {
				t.Errorf("taint step %+v", tn)
			}
			ids := []string{}
			for _, s := range res.Plan.Steps {
				ids = append(ids, s.ID)
			}
			if op, w, tn := slices.Index(ids, "release-gpu-operator"), slices.Index(ids, "wait-toleration"), slices.Index(ids, "taint"); !(op < w && w < tn) {
				t.Errorf("steps %v: the policy (operator release) and its wait must come before the taint", ids)
			}
			for node, taints := range taintsByNode(t, c) {
				tainted := slices.ContainsFunc(taints, func(tn corev1.Taint) bool { return tn == taint.GPUTaint })
				if tainted != slices.Contains(gpuNodes, node) {
					t.Errorf("node %s: tainted %v, GPU node %v", node, tainted, slices.Contains(gpuNodes, node))
				}
			}
		})
		t.Run("a GPU pod without a toleration created after the install gets scheduled", func(t *testing.T) {
			createDeployment(t, c, "cuda", corev1.PodSpec{Containers: []corev1.Container{{Name: "cuda", Image: "nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}})
			pods := waitPodsReady(t, c, "default", "app=cuda", 1)
			if p := pods[0]; !slices.Contains(gpuNodes, p.Spec.NodeName) || !taint.Tolerates(p.Spec.Tolerations, taint.GPUTaint) {
				t.Errorf("pod on %q with tolerations %v", p.Spec.NodeName, p.Spec.Tolerations)
			}
		})
		t.Run("a plain Deployment still runs, on the CPU worker", func(t *testing.T) {
			createDeployment(t, c, "web", corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}})
			if p := waitPodsReady(t, c, "default", "app=web", 1)[0]; slices.Contains(gpuNodes, p.Spec.NodeName) {
				t.Errorf("plain pod on GPU node %s", p.Spec.NodeName)
			}
		})
		t.Run("a second install changes nothing", func(t *testing.T) {
			assertRerunChangesNothing(t, c, nil)
		})
		t.Run("uninstall removes the policy with the operator release", func(t *testing.T) {
			if code, _, stderr := uninstallJSON(t, c, "--yes"); code != 0 {
				t.Fatalf("uninstall exited %d:\n%s", code, stderr)
			}
			_, err := c.Kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, "gpuctl-gpu-toleration", metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("policy after uninstall: %v", err)
			}
			_, err = c.Kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Get(ctx, "gpuctl-gpu-toleration", metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("binding after uninstall: %v", err)
			}
		})
	})
}

// stepSkipped: the run reported the step skipped (the safety check may drop the taint at run time).
func stepSkipped(res engine.InstallResult, id string) bool {
	for _, s := range res.Steps {
		if s.ID == id {
			return s.Outcome == event.StepSkipped
		}
	}
	return false
}
