package ui

import (
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
)

func TestPrintUpgradePreviewShowsSharing(t *testing.T) {
	p := &engine.UpgradePreview{From: "v26.7.0", To: "v26.7.0", Change: plan.VersionSame,
		Sharing: &engine.SharingChange{From: []string{"gpu-pool=time-slicing=4"}, To: []string{"gpu-pool=mps=2"},
			Labels: &plan.NodeLabels{Key: plan.SharingLabel, Nodes: map[string]string{"gke-b": "mps-2", "gke-a": "mps-2"}}}}
	var b strings.Builder
	if err := PrintUpgradePreview(&b, p, Style{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"GPU sharing: gpu-pool=time-slicing=4 → gpu-pool=mps=2\n  gke-a: nvidia.com/device-plugin.config=mps-2\n  gke-b: nvidia.com/device-plugin.config=mps-2\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("preview lacks %q:\n%s", want, b.String())
		}
	}
	if !p.Changed() {
		t.Error("a sharing change alone does not count as a change")
	}
}
