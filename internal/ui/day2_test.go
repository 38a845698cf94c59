package ui

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
)

func TestPrintStatus(t *testing.T) {
	res := &engine.StatusResult{Installed: true, Checks: []engine.StatusCheck{
		{Name: "operator", State: engine.CheckOK, Message: "Deployment gpu-operator/gpu-operator available (v26.7.0)"},
		{Name: "gpu nodes", State: engine.CheckFailed, Message: "1/2 GPU nodes validated; not: gpu-2", Hint: "kubectl get pods"},
	}, Nodes: []engine.NodeStatus{
		{Name: "gpu-1", Validated: true, GPUs: 8, Product: "NVIDIA-H100", Allocatable: 8, Driver: "Ready", Toolkit: "Ready", DevicePlugin: "Ready", Tainted: true},
		{Name: "gpu-2", Driver: "CrashLoopBackOff", Toolkit: "-", DevicePlugin: "-"},
	}}
	var b bytes.Buffer
	if err := PrintStatus(&b, res, Style{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"ok operator: Deployment", "FAILED gpu nodes: 1/2", "    hint: kubectl get pods", "CrashLoopBackOff", "NVIDIA-H100", "Status: FAILED not ready"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestPrintUpgradePreview(t *testing.T) {
	p := &engine.UpgradePreview{From: "v25.10.1", To: "v26.7.0", Change: plan.VersionUpgrade, Notes: []string{"apply the CRDs first"},
		Releases: []engine.ReleaseChange{{Name: "gpu-operator", FromChart: "gpu-operator-25.10.1", FromApp: "v25.10.1", FromRevison: 1, ToChart: "gpu-operator-26.7.0", ToApp: "v26.7.0", Outcome: release.WouldUpgrade}},
		Diffs:    []render.ObjectDiff{{Release: "gpu-operator", Object: "ClusterPolicy cluster-policy", Change: "changed", Diff: "--- a\n+++ b\n-  old\n+  new\n"}}}
	var b bytes.Buffer
	if err := PrintUpgradePreview(&b, p, Style{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"v25.10.1 → v26.7.0 (upgrade)", "gpu-operator-25.10.1 (v25.10.1, revision 1)", "would-upgrade", "  - apply the CRDs first", "changed ClusterPolicy cluster-policy (gpu-operator):", "+  new"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
