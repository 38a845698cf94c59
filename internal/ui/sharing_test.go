package ui

import (
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
)

func TestPrintUpgradePreviewShowsMIG(t *testing.T) {
	p := &engine.UpgradePreview{From: "v26.7.0", To: "v26.7.0", Change: plan.VersionSame,
		MIG: &engine.MIGChange{From: []string{"mixed", "a100=all-1g.5gb"}, To: []string{"mixed", "a100=all-3g.20gb"}, Repartition: []string{"gke-a"},
			Labels: &plan.NodeLabels{Key: plan.MIGLabel, Nodes: map[string]string{"gke-b": "all-3g.20gb", "gke-a": "all-3g.20gb"}}}}
	var b strings.Builder
	if err := PrintUpgradePreview(&b, p, Style{}); err != nil {
		t.Fatal(err)
	}
	want := "MIG: mixed a100=all-1g.5gb → mixed a100=all-3g.20gb\n" +
		"  gke-a: nvidia.com/mig.config=all-3g.20gb  (new config: MIG manager repartitions its GPUs and stops the GPU pods on it)\n" +
		"  gke-b: nvidia.com/mig.config=all-3g.20gb\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("preview lacks %q:\n%s", want, b.String())
	}
	if !p.Changed() {
		t.Error("a MIG change alone does not count as a change")
	}
	same := &engine.UpgradePreview{MIG: &engine.MIGChange{From: []string{"mixed"}, To: []string{"mixed"}}}
	if same.Changed() {
		t.Error("the same MIG choice, no node to repartition: counted as a change")
	}
}

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
