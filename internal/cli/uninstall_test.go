package cli

import (
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/engine"
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
		Purge: &runner.PurgePlan{CRDs: []string{"nvidiadrivers.nvidia.com"}, Foreign: []string{"NVIDIADriver team-a"},
			Delete:         []runner.PlannedDeletion{{Step: "purge-crds", Kind: "CustomResourceDefinition", Name: "nvidiadrivers.nvidia.com", UID: "c1", Why: "created by gpuctl (install record)"}},
			Kept:           []runner.KeptObject{{Kind: "Secret", Namespace: "gpu-operator", Name: "ngc-secret", Why: "not the one gpuctl created (UID differs)"}},
			KeptNamespaces: []runner.KeptNamespace{{Name: "gpu-operator", Holds: []string{"ConfigMap team-notes"}}}},
	})
	for _, want := range []string{
		"delete ClusterPolicy cluster-policy (uid 0b5e; created by gpuctl (install record))",
		"keep NVIDIADriver team-a (not created by gpuctl)",
		"node gpu-1: remove label nvidia.com/gpu.present",
		"node gpu-1: keep nvidia.com/mig.config (written by [kubectl-label])",
		"delete CustomResourceDefinition nvidiadrivers.nvidia.com (uid c1; created by gpuctl (install record))",
		"kept: Secret gpu-operator/ngc-secret is not the one gpuctl created (UID differs)",
		"keep namespace gpu-operator: it holds ConfigMap team-notes, which gpuctl did not create",
		"refuse to delete (not created by gpuctl; --force deletes it): NVIDIADriver team-a",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, b.String())
		}
	}
}

func TestUninstallSaysWhatPurgeKept(t *testing.T) {
	var b strings.Builder
	u := &uninstallCmd{streams: Streams{Out: &b}, output: "text"}
	u.o.Purge = true
	res := &engine.UninstallResult{Changed: true, Plan: &runner.UninstallPlan{Purge: &runner.PurgePlan{
		Kept: []runner.KeptObject{{Kind: "CustomResourceDefinition", Name: "nvidiadrivers.nvidia.com", Why: "not the one gpuctl created (UID differs)"}}}},
		KeptNamespaces: []runner.KeptNamespace{{Name: "gpu-operator", Holds: []string{"ConfigMap team-notes"}}}}
	if err := u.writeResult(res, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Uninstalled.", "Kept CustomResourceDefinition nvidiadrivers.nvidia.com: not the one gpuctl created (UID differs).",
		"Kept namespace gpu-operator: it holds ConfigMap team-notes, which gpuctl did not create."} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}
