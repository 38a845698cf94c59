package cli

import (
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/runner"
)

func TestUninstallForceNeedsPurge(t *testing.T) {
	code, _, errOut := run(t, nil, "uninstall", "--force", "--yes", "--kubeconfig", "/nonexistent")
	if code != ExitUsage || !strings.Contains(errOut, "--purge") {
		t.Errorf("uninstall --force without --purge: exit %d, %q; want %d naming --purge", code, errOut, ExitUsage)
	}
}

func TestUninstallPlanSaysWhatGoesAndWhatStays(t *testing.T) {
	var b strings.Builder
	printUninstallPlan(&b, &runner.UninstallPlan{
		Delete: []runner.PlannedDeletion{{Kind: "ClusterPolicy", Name: "cluster-policy", UID: "0b5e", Why: "created by gpuctl (install record)"}},
		Kept:   []runner.KeptObject{{Kind: "NVIDIADriver", Name: "team-a", Why: "not created by gpuctl"}},
		Nodes: []runner.NodeLabelPlan{{Node: "gpu-1", RemoveLabels: []string{"nvidia.com/gpu.present"},
			Kept: []runner.KeptKey{{Key: "nvidia.com/mig.config", Managers: []string{"kubectl-label"}}}}},
		Purge: &runner.PurgePlan{CRDs: []string{"nvidiadrivers.nvidia.com"}, Foreign: []string{"NVIDIADriver team-a"}},
	})
	for _, want := range []string{
		"delete ClusterPolicy cluster-policy (uid 0b5e; created by gpuctl (install record))",
		"keep NVIDIADriver team-a (not created by gpuctl)",
		"node gpu-1: remove label nvidia.com/gpu.present",
		"node gpu-1: keep nvidia.com/mig.config (written by [kubectl-label])",
		"delete CRD nvidiadrivers.nvidia.com",
		"refuse to delete (not created by gpuctl; --force deletes it): NVIDIADriver team-a",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, b.String())
		}
	}
}
