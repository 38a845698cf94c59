package ui

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/release"
)

// TestPrintUpgradePath: an upgrade two majors ahead shows its path and why, then each hop as a one-hop
// upgrade's preview shows it, its value changes included.
func TestPrintUpgradePath(t *testing.T) {
	hop := func(from, to string, values *bundle.ValueChanges) *engine.UpgradePreview {
		return &engine.UpgradePreview{From: from, To: to, Change: plan.VersionUpgrade, Values: values,
			Releases: []engine.ReleaseChange{{Name: "gpu-operator", FromChart: "gpu-operator-" + from, ToChart: "gpu-operator-" + to, Outcome: release.WouldUpgrade}}}
	}
	previews := []*engine.UpgradePreview{
		hop("v25.10.1", "v26.3.3", &bundle.ValueChanges{From: "v25.10.1", To: "v26.3.3", ChangedDefaults: []bundle.ChangedDefault{{Key: "ccManager.enabled", From: false, To: true}}}),
		hop("v26.3.3", "v26.7.0", nil),
	}
	var b bytes.Buffer
	if err := PrintUpgradePath(&b, previews, Style{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"GPU Operator v25.10.1 → v26.7.0 through v26.3.3", "within a major release or to the next one",
		"Upgrade 1/2", "GPU Operator v25.10.1 → v26.3.3 (upgrade)", "ccManager.enabled: default changes from false to true",
		"Upgrade 2/2", "GPU Operator v26.3.3 → v26.7.0 (upgrade)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "Upgrade 1/2") > strings.Index(out, "Upgrade 2/2") {
		t.Errorf("hops out of order:\n%s", out)
	}
}
