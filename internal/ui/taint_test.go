package ui

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/taint"
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

func TestPrintNodePlan(t *testing.T) {
	node := func(name, record string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if record != "" {
			n.Annotations = map[string]string{taint.AddedTaintsAnnotation: record}
		}
		return n
	}
	var nodes []corev1.Node
	for _, n := range []string{"cpu-1", "cpu-2", "cpu-3", "cpu-4", "cpu-5", "cpu-6", "gpu-1"} {
		nodes = append(nodes, node(n, ""))
	}
	p := plan.TaintNodesPlan(nodes, []string{"gpu-1"}, taint.GPUTaint, plan.TaintDecision{Default: "nothing adds the toleration"}, false)
	var b strings.Builder
	printNodePlan(&b, p, "gpuctl taint would:")
	for _, want := range []string{
		"gpuctl taint would:\n  node/gpu-1: add nvidia.com/gpu=present:NoSchedule\n",
		"  leave node/cpu-1, node/cpu-2, node/cpu-3, node/cpu-4, node/cpu-5, and 1 more (-o json lists them): not a GPU node\n",
		"Warning: gpuctl install would not taint these nodes by default: nothing adds the toleration\n",
		"Pods that should run on the tainted nodes need {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}.\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	printNodePlan(&b, plan.UntaintNodesPlan([]corev1.Node{node("gpu-1", `[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}]`)}), "gpuctl untaint would:")
	if !strings.Contains(b.String(), "node/gpu-1: forget gpuctl's record gpuctl.io/added-taints (it names no taint the node has)") {
		t.Errorf("text:\n%s", b.String())
	}
}
