package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
)

// TestWizardInstallsThroughATerminal is a person's first install: the wizard in a real terminal
// (tmux) against a GKE-flavoured sandbox, driven by keys through every screen to a finished install
// with the real operator's ClusterPolicy Reconciled; then the saved file replays the same Plan.
func TestWizardInstallsThroughATerminal(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "gke", GPUNodes: 2, CPUNodes: 1}})
	dir := t.TempDir()
	bin, err := gpuctlBinary()
	if err != nil {
		t.Fatal(err)
	}
	saved, planFile, exitFile := filepath.Join(dir, "gpuctl.yaml"), filepath.Join(dir, "plan.json"), filepath.Join(dir, "exit")
	script := fmt.Sprintf("cd %s && %s wizard --save %s --plan-file %s; echo $? > %s; sleep 600", dir, bin, saved, planFile, exitFile)
	term := newTerminal(t, []string{"KUBECONFIG=" + c.Kubeconfig, "TERM=xterm-256color", "HOME=" + dir, "PATH=/usr/bin:/bin"}, "sh", "-c", script)
	gpuNodes := simulatedGPUNodes(c)
	start := time.Now()

	term.waitFor(time.Minute, "[1 Context]", "Which cluster?", "› sandbox")
	term.keys("Enter")
	s := term.waitFor(2*time.Minute, "[2 Detection]", "Distribution gke", "GPU nodes", "Preflight")
	for _, n := range gpuNodes {
		if !strings.Contains(s, n) {
			t.Errorf("detection does not list GPU node %s:\n%s", n, s)
		}
	}
	term.keys("?")
	term.waitFor(10*time.Second, "page down")
	term.keys("?", "Enter")
	term.waitFor(10*time.Second, "[3 Choices]", "‹ gke (detected) ›", "‹ platform-managed ›")
	term.keys("Enter")
	term.waitFor(2*time.Minute, "[4 Review]", "Steps", "Install NVIDIA GPU Operator")
	// The taint's nodes follow the steps, below the first page of an 80x24 terminal.
	term.keys("NPage")
	term.waitFor(10*time.Second, "Nodes to taint")
	term.keys("s")
	term.waitFor(10*time.Second, "✔ saved")
	term.keys("Enter")
	term.waitFor(5*time.Minute, "✔ Installed", "ready (Reconciled)")
	term.keys("Enter")
	s = term.waitFor(30*time.Second, "GPU nodes validated", "gpuctl install --config "+saved)
	t.Logf("wizard: %s from the first screen to the summary", time.Since(start).Round(time.Second))

	var code []byte
	waitUntil(t, time.Minute, "the shell wrote the wizard's exit code", func(context.Context) (bool, error) {
		var err error
		code, err = os.ReadFile(exitFile)
		return err == nil, err
	})
	if strings.TrimSpace(string(code)) != "0" {
		t.Errorf("gpuctl wizard exited %q:\n%s", code, s)
	}
	if out := os.Getenv("GPUCTL_WIZARD_CAPTURES"); out != "" {
		if err := os.WriteFile(out, []byte(strings.Join(term.captures, "\f\n")), 0o644); err != nil {
			t.Error(err)
		}
	}

	t.Run("the real operator reconciled the ClusterPolicy and every GPU node is tainted", func(t *testing.T) {
		assertReconciled(t, c, "cluster-policy")
		for node, taints := range taintsByNode(t, c) {
			tainted := false
			for _, tn := range taints {
				tainted = tainted || (tn.Key == "nvidia.com/gpu" && tn.Value == "present")
			}
			if gpu := slices.Contains(gpuNodes, node); tainted != gpu {
				t.Errorf("node %s: tainted %v, GPU node %v", node, tainted, gpu)
			}
		}
	})

	t.Run("the saved file gives install --dry-run the Plan the wizard showed and confirmed", func(t *testing.T) {
		b, err := os.ReadFile(saved)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("version: 1")) {
			t.Errorf("saved config has no version:\n%s", b)
		}
		confirmed, err := os.ReadFile(planFile)
		if err != nil {
			t.Fatal(err)
		}
		exit, stdout, stderr := gpuctl(t, c, "install", "--config", saved, "--dry-run", "-o", "json")
		if exit != 0 {
			t.Fatalf("install --config --dry-run exited %d:\n%s", exit, stderr)
		}
		var want, got any
		if err := json.Unmarshal(confirmed, &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatal(err)
		}
		// The printed document names its apiVersion and kind, and a dry run adds what the plan would
		// write in the cluster as it is now (its writes, read from the cluster); the Plan is the rest.
		if m, ok := got.(map[string]any); ok {
			if w, _ := m["writes"].(map[string]any); len(w) == 0 {
				t.Error("install --dry-run lists no writes")
			}
			delete(m, "apiVersion")
			delete(m, "kind")
			delete(m, "writes")
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("plans differ:\nconfirmed in the wizard:\n%s\nreplayed:\n%s", confirmed, stdout)
		}
	})
}
