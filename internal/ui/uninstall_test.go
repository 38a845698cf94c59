package ui

import (
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/uninstall"
)

func TestUninstallPlanSaysWhatGoesAndWhatStays(t *testing.T) {
	var b strings.Builder
	printUninstallPlan(&b, &uninstall.Plan{
		Delete: []uninstall.PlannedDeletion{{Kind: "ClusterPolicy", Name: "cluster-policy", UID: "0b5e", Why: "created by gpuctl (install record)"}},
		Kept:   []uninstall.KeptObject{{Kind: "NVIDIADriver", Name: "team-a", Why: "not created by gpuctl"}},
		Nodes: []uninstall.NodeLabelPlan{{Node: "gpu-1", RemoveLabels: []string{"nvidia.com/gpu.present"},
			Kept: []uninstall.KeptKey{{Key: "nvidia.com/mig.config", Managers: []string{"kubectl-label"}}}}},
		Purge: &uninstall.PurgePlan{CRDs: []string{"nvidiadrivers.nvidia.com"}, Foreign: []string{"NVIDIADriver team-a"},
			Delete:         []uninstall.PlannedDeletion{{Step: "purge-crds", Kind: "CustomResourceDefinition", Name: "nvidiadrivers.nvidia.com", UID: "c1", Why: "created by gpuctl (install record)"}},
			Kept:           []uninstall.KeptObject{{Kind: "Secret", Namespace: "gpu-operator", Name: "ngc-secret", Why: "not the one gpuctl created (UID differs)"}},
			KeptNamespaces: []uninstall.KeptNamespace{{Name: "gpu-operator", Holds: []string{"ConfigMap team-notes"}}}},
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
