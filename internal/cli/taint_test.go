package cli

import (
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/runner"
	"github.com/gpuctl/gpuctl/internal/ui"
)

func TestTaintFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"taint takes -o json, yaml or text only", []string{"taint", "-o", "xml"}, `-o must be one of text, json, yaml, not "xml"`},
		{"untaint takes -o json, yaml or text only", []string{"untaint", "--dry-run", "-o", "wide"}, `-o must be one of text, json, yaml, not "wide"`},
		{"untaint has no --force: it never strands anything", []string{"untaint", "--force"}, "unknown flag: --force"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, nil, append(tc.args, "--kubeconfig", "/nonexistent")...)
			if code != ExitUsage || !strings.Contains(errOut, tc.want) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d naming %q", code, out, errOut, ExitUsage, tc.want)
			}
		})
	}
}

func TestTaintRefusalIsOneLineAndExit5(t *testing.T) {
	var b strings.Builder
	err := &engine.StrandedError{Workloads: []plan.TaintWorkload{{Kind: "Deployment", Namespace: "web", Name: "pinned", Effect: "no schedulable node without GPUs fits its pods", Stranded: true}}}
	if code := report(&b, err); code != ExitPreflight {
		t.Errorf("exit %d, want %d", code, ExitPreflight)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "Deployment web/pinned") || !strings.Contains(lines[0], "--force") || lines[1] != "Nothing was changed." {
		t.Errorf("report:\n%s", b.String())
	}
}

// An interrupted taint prints what it wrote and what it did not, and report says where it stopped:
// the nodes the step's state read back, and how to go on.
func TestTaintInterruptedOutput(t *testing.T) {
	add := plan.NodeChange{Node: "gpu-1", Action: plan.ActionAdd, Taints: []plan.TaintSpec{{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}}}
	other := plan.NodeChange{Node: "gpu-2", Action: plan.ActionAdd, Taints: add.Taints}
	p := &plan.NodePlan{Verb: "taint", Changes: []plan.NodeChange{add, other}}
	step := runner.StepResult{ID: "taint", Title: "Taint 2 GPU nodes", Outcome: event.StepInterrupted, Message: "1/2 planned nodes tainted nvidia.com/gpu=present:NoSchedule"}
	ie := &runner.InterruptedError{InFlight: &step, Count: 1, Resume: engine.TaintResume}
	res := &engine.TaintResult{Plan: p, Done: []plan.NodeChange{add}, NotDone: []plan.NodeUnchanged{{Node: "gpu-2", Reason: "not written: the run stopped first"}}, Steps: []runner.StepResult{step}}

	var b strings.Builder
	if err := ui.PrintTaintResult(&b, res, ie); err != nil {
		t.Fatal(err)
	}
	if want := "gpuctl taint did:\n  node/gpu-1: add nvidia.com/gpu=present:NoSchedule\n"; !strings.HasPrefix(b.String(), want) || !strings.Contains(b.String(), "  not done: node/gpu-2: not written: the run stopped first\n") {
		t.Errorf("result:\n%s", b.String())
	}
	b.Reset()
	if code := report(&b, ie); code != ExitInterrupted {
		t.Errorf("exit %d, want %d", code, ExitInterrupted)
	}
	for _, want := range []string{"interrupted during step 1/1, Taint 2 GPU nodes", "taint: 1/2 planned nodes tainted", "To go on, run gpuctl taint again"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}
