package engine

import (
	"testing"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
)

// TestUpgradeKeepsAnAdoptedReleasesValues: the values of a release gpuctl adopted stay a layer of
// their own on every upgrade (where the adopting install put them), recorded again, and count as the
// user's in the upgrade's value findings.
func TestUpgradeKeepsAnAdoptedReleasesValues(t *testing.T) {
	adopted := &plan.Layer{Source: plan.AdoptedSource("gpu-operator", "gpu-operator"), Values: map[string]any{"driver": map[string]any{"enabled": false}}}
	rec := &record.Record{Namespace: "gpu-operator", OperatorVersion: "v26.3.3", Inputs: record.Inputs{Adopted: adopted}}
	inst := (&Upgrade{Clients: &kube.Clients{}}).install(rec, "v26.7.0", nil, UpgradeOptions{}, nil)
	if inst.Options.AdoptedValues != adopted {
		t.Errorf("the upgrade's install options carry %+v, want the recorded adopted layer", inst.Options.AdoptedValues)
	}
	in, err := readInputs(inst.Options)
	if err != nil {
		t.Fatal(err)
	}
	if got := recordInputs(inst.Options, nil, adoptedLayer(in, nil)).Adopted; got != adopted {
		t.Errorf("the upgrade's record keeps %+v, want the adopted layer", got)
	}
	user, err := userValues(rec.Inputs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := user["driver"].(map[string]any); d["enabled"] != false {
		t.Errorf("the user's values %v lack the adopted driver.enabled=false", user)
	}
}
