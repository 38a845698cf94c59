package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// TestGPUNodeWithItsOwnTaint: a GPU node that carries a NoSchedule taint of its own (here dedicated=ml,
// as a person reserving a node pool would set it) is out of reach of NFD's worker and the operands. The
// install refuses it before the first write, naming node, taint and flag; with
// --tolerate-existing-taints it installs, and every one of the three GPU nodes is validated.
func TestGPUNodeWithItsOwnTaint(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "gke", GPUNodes: 3, CPUNodes: 1}})
	ctx := t.Context()
	gpuNodes := simulatedGPUNodes(c)
	if len(gpuNodes) != 3 {
		t.Fatalf("GPU nodes %v, want 3", gpuNodes)
	}
	reserved := gpuNodes[1]
	dedicated := corev1.Taint{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}
	n, err := c.Kube.CoreV1().Nodes().Get(ctx, reserved, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = append(n.Spec.Taints, dedicated)
	if _, err := c.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	var res engine.InstallResult // the install's, which the steps after it read
	story(t,
		step{"install refuses before the first write, naming the node, the taint and the flag", func(t *testing.T) {
			before := clusterState(t, c)
			code, stdout, stderr := gpuctl(t, c, "install")
			if code != cli.ExitPreflight {
				t.Errorf("exit %d, want %d", code, cli.ExitPreflight)
			}
			for _, want := range []string{"gpu-node-taints", "GPU node " + reserved + " has taint dedicated=ml:NoSchedule", "--tolerate-existing-taints"} {
				if !strings.Contains(stdout+stderr, want) {
					t.Errorf("output does not mention %q", want)
				}
			}
			assertUnchanged(t, before, clusterState(t, c))
		}},

		step{"check --pre with the flag passes that check", func(t *testing.T) {
			code, stdout, _ := gpuctl(t, c, "check", "--pre", "--tolerate-existing-taints", "-o", "json")
			if code != 0 {
				t.Errorf("check --pre --tolerate-existing-taints exited %d:\n%s", code, stdout)
			}
			if !strings.Contains(stdout, `"id": "gpu-node-taints"`) {
				t.Errorf("no gpu-node-taints result in:\n%s", stdout)
			}
		}},

		step{"with --tolerate-existing-taints it installs and validates all three GPU nodes", func(t *testing.T) {
			code, stdout, stderr := gpuctl(t, c, "install", "--tolerate-existing-taints", "-o", "json")
			if code != 0 {
				t.Fatalf("install exited %d:\n%s", code, stderr)
			}
			if err := json.Unmarshal([]byte(stdout), &res); err != nil {
				t.Fatalf("install -o json: %v\n%s", err, stdout)
			}
			if !slices.Equal(res.GPUNodes, gpuNodes) {
				t.Errorf("validated %v, want %v", res.GPUNodes, gpuNodes)
			}
			for _, s := range res.Steps {
				if s.ID == "wait-validators" && s.Message != "3/3 GPU nodes validated" {
					t.Errorf("wait-validators: %q, want 3/3 GPU nodes validated", s.Message)
				}
			}
			pods, err := c.Kube.CoreV1().Pods(res.Plan.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=nvidia-operator-validator"})
			if err != nil {
				t.Fatal(err)
			}
			var on []string
			for _, p := range pods.Items {
				if podIsReady(&p) {
					on = append(on, p.Spec.NodeName)
				}
			}
			if !slices.Contains(on, reserved) {
				t.Errorf("no Ready validator on %s (Ready on %v)", reserved, on)
			}
		}},

		step{"the plan shows the tolerations as their own layer, and the DaemonSets carry them", func(t *testing.T) {
			if res.Plan == nil {
				t.Skip("no install result")
			}
			for _, id := range []string{"release-gpu-operator", "release-node-feature-discovery"} {
				s := res.Plan.Step(id)
				found := false
				for _, l := range s.Release.Layers {
					found = found || strings.HasPrefix(l.Source, "--tolerate-existing-taints: ") && strings.Contains(l.Source, reserved+" dedicated=ml:NoSchedule")
				}
				if !found {
					t.Errorf("%s has no --tolerate-existing-taints layer naming %s", id, reserved)
				}
			}
			dss, err := c.Kube.AppsV1().DaemonSets(res.Plan.Namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range dss.Items {
				if !taint.Tolerates(d.Spec.Template.Spec.Tolerations, dedicated) {
					t.Errorf("DaemonSet %s does not tolerate dedicated=ml:NoSchedule", d.Name)
				}
			}
		}},

		step{"a second run with the same flags changes nothing", func(t *testing.T) {
			assertRerunChangesNothing(t, c, nil, "--tolerate-existing-taints")
		}},
	)
}

// TestSafetyTolerationsKeepTheirPlaceOnRerun: on a kubeadm cluster whose every worker is a GPU node,
// tainted with --taint (gpuctl does not taint such a cluster by default), detection cannot know that
// before NFD has run, so the first install's safety check adds the operator's and NFD master/gc's
// toleration at run time, and the next install's detection plans it.
// Both put it among the detected facts, below --set, so the user's operator.tolerations win both times
// and the second run upgrades nothing.
func TestSafetyTolerationsKeepTheirPlaceOnRerun(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 2}})
	ctx := t.Context()
	args := []string{"install", "--taint", "--set", "operator.tolerations[0].operator=Exists", "-o", "json"}
	install := func() engine.InstallResult {
		t.Helper()
		code, stdout, stderr := gpuctl(t, c, args...)
		if code != 0 {
			t.Fatalf("install exited %d:\n%s", code, stderr)
		}
		var res engine.InstallResult
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("install -o json: %v\n%s", err, stdout)
		}
		return res
	}
	first := install()
	if first.Plan.Step("safety").Safety.TolerationsPlanned {
		t.Fatal("the first plan already knew every worker is a GPU node; this test needs the run-time path")
	}
	revisions := map[string]int{}
	for _, r := range first.Releases {
		revisions[r.Name] = r.Revision
	}
	want := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	dep, err := c.Kube.AppsV1().Deployments(first.Plan.Namespace).Get(ctx, "gpu-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := dep.Spec.Template.Spec.Tolerations; !slices.EqualFunc(got, want, func(a, b corev1.Toleration) bool { return a == b }) {
		t.Errorf("first run: operator tolerations %v, want --set's %v (the safety check's go below it)", got, want)
	}

	second := install()
	if !second.Plan.Step("safety").Safety.TolerationsPlanned {
		t.Error("the second plan does not know every worker is a GPU node")
	}
	if second.Changed {
		t.Errorf("the second run changed something: %+v", second.Steps)
	}
	for _, r := range second.Releases {
		if r.Revision != revisions[r.Name] {
			t.Errorf("release %s: revision %d after the second run, %d after the first", r.Name, r.Revision, revisions[r.Name])
		}
	}
}
