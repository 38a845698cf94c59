package cli

import (
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/uninstall"
)

func TestUninstallForceNeedsPurge(t *testing.T) {
	code, _, errOut := run(t, nil, "uninstall", "--force", "--yes", "--kubeconfig", "/nonexistent")
	if code != ExitUsage || !strings.Contains(errOut, "--purge") {
		t.Errorf("uninstall --force without --purge: exit %d, %q; want %d naming --purge", code, errOut, ExitUsage)
	}
}

func TestUninstallSaysWhatPurgeKept(t *testing.T) {
	var b strings.Builder
	u := &uninstallCmd{streams: Streams{Out: &b}, output: "text"}
	u.o.Purge = true
	res := &engine.UninstallResult{Changed: true, Plan: &uninstall.Plan{Purge: &uninstall.PurgePlan{
		Kept: []uninstall.KeptObject{{Kind: "CustomResourceDefinition", Name: "nvidiadrivers.nvidia.com", Why: "not the one gpuctl created (UID differs)"}}}},
		KeptNamespaces: []uninstall.KeptNamespace{{Name: "gpu-operator", Holds: []string{"ConfigMap team-notes"}}}}
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
