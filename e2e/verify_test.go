package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	docschema "github.com/gpuctl/gpuctl/e2e/schema"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/event"
)

// TestVerify installs the stack on three GPU nodes, one with a broken GPU (the sandbox's kwok stage
// fails every GPU workload there), and runs gpuctl verify against it: it names the broken node, passes
// on the healthy ones, reports a cordoned node as unschedulable with the scheduler's reason, and
// removes its pods on Ctrl-C; after a SIGKILL the next run removes what the killed one left.
func TestVerify(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 3, CPUNodes: 1, BrokenGPUNodes: 1}})
	installJSON(t, c)
	gpu := simulatedGPUNodes(c)
	if len(c.BrokenGPUNodes) != 1 {
		t.Fatalf("the sandbox marks %v broken, want one node", c.BrokenGPUNodes)
	}
	broken := c.BrokenGPUNodes[0]
	var healthy []string
	for _, n := range gpu {
		if n != broken {
			healthy = append(healthy, n)
		}
	}
	// The healthy nodes get a label of the test's own, for --nodes.
	for _, n := range healthy {
		patch := []byte(`{"metadata":{"labels":{"e2e.gpuctl.io/gpu":"healthy"}}}`)
		if _, err := c.Kube.CoreV1().Nodes().Patch(t.Context(), n, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("verify fails on the broken GPU node, names it, passes the others and leaves no pod", func(t *testing.T) {
		w := watchVerifyPods(t, c, "gpu-operator")
		code, stdout, stderr := gpuctl(t, c, "verify", "-o", "json")
		seen := w.stop(t)
		if code != cli.ExitVerifyFailed {
			t.Fatalf("exit %d, want %d:\n%s", code, cli.ExitVerifyFailed, stderr)
		}
		if kind, err := docschema.Validate([]byte(stdout)); err != nil || kind != "VerifyResult" {
			t.Errorf("-o json (%s) does not match its schema: %v", kind, err)
		}
		res := decodeVerify(t, stdout)
		got := verifyOutcomes(res)
		for _, n := range healthy {
			if got[n] != engine.VerifyPassed {
				t.Errorf("%s: %s, want passed", n, got[n])
			}
		}
		if got[broken] != engine.VerifyFailed {
			t.Errorf("%s: %s, want failed", broken, got[broken])
		}
		for _, n := range res.Nodes {
			if n.Node == broken && !strings.Contains(n.Reason, "exited with code 1") {
				t.Errorf("the broken node's reason %q does not name the container's exit", n.Reason)
			}
		}
		if len(got) != len(gpu) || res.Passed {
			t.Errorf("verified %v (passed %v), want every GPU node %v", got, res.Passed, gpu)
		}
		if len(res.Removed) != len(gpu) {
			t.Errorf("removed %v, want one pod per GPU node", res.Removed)
		}
		assertNoVerifyPods(t, c)
		// What the run reports it created is what the API server shows it created, and each pod ran on
		// the node its verdict names (its last state before deletion: bound there).
		var reported, created []verifyPodV1
		if res.Done != nil {
			for _, pp := range res.Done.Create {
				reported = append(reported, verifyPodV1{Namespace: pp.Namespace, Name: pp.Name, Node: pp.Node, Image: pp.Image, Resource: pp.Resource})
			}
		}
		for _, pod := range seen.created {
			created = append(created, podAsPlanned(pod))
		}
		if len(created) != len(gpu) || !slices.Equal(reported, created) {
			t.Errorf("the run reports it created\n%+v\nthe API server shows\n%+v", reported, created)
		}
		if len(seen.deleted) != len(created) {
			t.Errorf("the API server shows %d of the run's pods deleted, %d created", len(seen.deleted), len(created))
		}
		verdicts := map[string]string{}
		for _, n := range res.Nodes {
			verdicts[n.Pod] = n.Node
		}
		for _, pod := range seen.deleted {
			if pod.Spec.NodeName == "" || verdicts[pod.Name] != pod.Spec.NodeName {
				t.Errorf("pod %s ran on %q, its verdict names node %q", pod.Name, pod.Spec.NodeName, verdicts[pod.Name])
			}
		}
	})

	t.Run("verify --nodes on the healthy nodes passes with exit 0", func(t *testing.T) {
		code, stdout, stderr := gpuctl(t, c, "verify", "--nodes", "e2e.gpuctl.io/gpu=healthy", "-o", "json")
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, stderr)
		}
		res := decodeVerify(t, stdout)
		if got := verifyOutcomes(res); len(got) != len(healthy) || got[healthy[0]] != engine.VerifyPassed || got[healthy[1]] != engine.VerifyPassed || !res.Passed {
			t.Errorf("verified %v, want %v passed", got, healthy)
		}
		assertNoVerifyPods(t, c)
	})

	t.Run("a --nodes selector that matches no GPU node is refused with exit 2 before any pod", func(t *testing.T) {
		code, _, stderr := gpuctl(t, c, "verify", "--nodes", "e2e.gpuctl.io/gpu=none")
		if code != cli.ExitUsage || !strings.Contains(stderr, "matches none of the GPU nodes") {
			t.Errorf("exit %d, want %d with a message naming the GPU nodes:\n%s", code, cli.ExitUsage, stderr)
		}
	})

	// From here on one healthy node is cordoned: the scheduler will not place the workload there.
	cordoned := healthy[0]
	verifyCordon(t, c, cordoned, true)
	only := "--nodes=kubernetes.io/hostname=" + cordoned

	t.Run("a cordoned GPU node is unschedulable, with the scheduler's reason", func(t *testing.T) {
		// Long enough for the scheduler to have judged the pod on a loaded machine: the outcome is
		// unschedulable only if it said so before the wait ended.
		code, stdout, stderr := gpuctl(t, c, "verify", only, "--timeout", "30s", "-o", "json")
		if code != cli.ExitVerifyFailed {
			t.Fatalf("exit %d, want %d:\n%s", code, cli.ExitVerifyFailed, stderr)
		}
		res := decodeVerify(t, stdout)
		if len(res.Nodes) != 1 || res.Nodes[0].Outcome != engine.VerifyUnschedulable || !strings.Contains(res.Nodes[0].Reason, "unschedulable") {
			t.Errorf("got %+v, want %s unschedulable with the scheduler's message", res.Nodes, cordoned)
		}
		assertNoVerifyPods(t, c)
	})

	bin, err := gpuctlBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("Ctrl-C while the workload waits removes the pods and exits 130", func(t *testing.T) {
		code, stderr := verifyAndSignal(t, c, bin, syscall.SIGINT, only)
		if code != cli.ExitInterrupted {
			t.Errorf("exit %d, want %d:\n%s", code, cli.ExitInterrupted, stderr)
		}
		if !strings.Contains(stderr, "removed 1 verify pod(s)") {
			t.Errorf("stderr does not say what was removed:\n%s", stderr)
		}
		assertNoVerifyPods(t, c)
	})

	t.Run("after a SIGKILL the next run removes the pods the killed one left", func(t *testing.T) {
		verifyAndSignal(t, c, bin, syscall.SIGKILL, only)
		left := verifyPodNames(t, c)
		if len(left) != 1 {
			t.Fatalf("a killed run left %v, want its one pod", left)
		}
		verifyCordon(t, c, cordoned, false)
		code, stdout, stderr := gpuctl(t, c, "verify", only, "-o", "json")
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, stderr)
		}
		if res := decodeVerify(t, stdout); !slices.Equal(res.RemovedEarlier, left) {
			t.Errorf("removed earlier %v, want %v", res.RemovedEarlier, left)
		}
		assertNoVerifyPods(t, c)
	})
}

func decodeVerify(t *testing.T, stdout string) engine.VerifyResult {
	t.Helper()
	var res engine.VerifyResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("verify -o json: %v\n%s", err, stdout)
	}
	return res
}

// verifyRequests reads verify -o json as "<what the node's pod asked for> <outcome>" per node: the
// extended resource, or "claim on <device class>" for a pod given its GPU through a ResourceClaim.
// It decodes the JSON itself, not engine.VerifyResult, so it reads what a script would.
func verifyRequests(t *testing.T, stdout string) map[string]string {
	t.Helper()
	var doc struct {
		Nodes []struct {
			Node        string `json:"node"`
			Outcome     string `json:"outcome"`
			Resource    string `json:"resource"`
			DeviceClass string `json:"deviceClass"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("verify -o json: %v\n%s", err, stdout)
	}
	out := map[string]string{}
	for _, n := range doc.Nodes {
		req := n.Resource
		if n.DeviceClass != "" {
			req = "claim on " + n.DeviceClass
		}
		out[n.Node] = req + " " + n.Outcome
	}
	return out
}

func verifyOutcomes(res engine.VerifyResult) map[string]engine.VerifyOutcome {
	out := map[string]engine.VerifyOutcome{}
	for _, n := range res.Nodes {
		out[n.Node] = n.Outcome
	}
	return out
}

func verifyCordon(t *testing.T, c *sandbox.Cluster, node string, on bool) {
	t.Helper()
	patch := []byte(`{"spec":{"unschedulable":false}}`)
	if on {
		patch = []byte(`{"spec":{"unschedulable":true}}`)
	}
	if _, err := c.Kube.CoreV1().Nodes().Patch(t.Context(), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// verifyAndSignal runs gpuctl verify as a process and sends it sig once its JSON progress says a
// workload waits on the scheduler: the pod exists, and the test reacts to gpuctl's own event.
func verifyAndSignal(t *testing.T, c *sandbox.Cluster, bin string, sig syscall.Signal, args ...string) (int, string) {
	t.Helper()
	waitsOnScheduler := func(ev event.Event) bool {
		return ev.Type == event.StepProgress && ev.Step == "wait" && strings.Contains(ev.Message, "unschedulable")
	}
	return signalAt(t, bin, append([]string{"--kubeconfig", c.Kubeconfig, "verify"}, args...), waitsOnScheduler, nil, sig)
}
