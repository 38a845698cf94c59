package ui

import (
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
)

func TestPrintTaintResult(t *testing.T) {
	add := plan.NodeChange{Node: "gpu-1", Action: plan.ActionAdd, Taints: []plan.TaintSpec{{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}}}
	moved := plan.NodeChange{Node: "gpu-2", Action: plan.ActionAdd, Taints: add.Taints}
	p := &plan.NodePlan{Verb: "taint", Changes: []plan.NodeChange{add, moved}, Unchanged: []plan.NodeUnchanged{{Node: "cpu-1", Reason: plan.ReasonNotGPU}}}

	var b strings.Builder
	if err := PrintTaintResult(&b, &engine.TaintResult{Plan: p, DryRun: true}, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gpuctl taint would:\n", "  node/gpu-1: add nvidia.com/gpu=present:NoSchedule\n", "  node/gpu-2: add", "  leave node/cpu-1: not a GPU node\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("dry run lacks %q:\n%s", want, b.String())
		}
	}

	b.Reset()
	if err := PrintTaintResult(&b, &engine.TaintResult{Plan: p, Done: []plan.NodeChange{add},
		NotDone: []plan.NodeUnchanged{{Node: "gpu-2", Reason: "node gpu-2 changed since the plan (now: already has nvidia.com/gpu=present:NoSchedule): not written; plan again"}}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gpuctl taint did:\n  node/gpu-1: add nvidia.com/gpu=present:NoSchedule\n", "  not done: node/gpu-2: node gpu-2 changed since the plan"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("run lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "node/gpu-2: add") {
		t.Errorf("the run lists a change it did not make:\n%s", b.String())
	}

	b.Reset()
	if err := PrintTaintResult(&b, &engine.TaintResult{Plan: p}, &engine.StrandedError{}); err != nil {
		t.Fatal(err)
	}
	if b.String() != "" {
		t.Errorf("a refused run printed %q", b.String())
	}
}
