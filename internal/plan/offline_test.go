package plan

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/detect"
)

// noNodes is detection without a cluster, as template, export and images plan with --profile.
func noNodes(r *detect.Result) { r.GPUNodes, r.Scheduling = nil, detect.Scheduling{} }

// TestOfflinePools: rendered without a cluster, a --sharing or --mig choice for a named pool is planned
// for the pool alone (its config, no node); with a cluster, or run, a pool detection does not know is
// refused as before.
func TestOfflinePools(t *testing.T) {
	t.Run("an offline --sharing POOL=MODE=N plans the pool's config and labels no node", func(t *testing.T) {
		p := build(t, detection("gke", noNodes), Options{Render: true, Offline: true, Sharing: []string{"gpu-pool=time-slicing=4"}})
		cfg, _ := at(operatorLayer(p, SharingSource), "devicePlugin", "config").(map[string]any)
		if data, _ := cfg["data"].(map[string]any); data["time-slicing-4"] == nil || cfg["default"] != "" {
			t.Errorf("devicePlugin.config = %v, want the pool's time-slicing-4 config and no default", cfg)
		}
		l := p.Step("node-labels").Labels
		if !maps.Equal(l.Pools, map[string]string{"gpu-pool": "time-slicing-4"}) || len(l.Nodes) != 0 {
			t.Errorf("labels: pools %v, nodes %v; want gpu-pool's config and no node", l.Pools, l.Nodes)
		}
	})

	t.Run("an offline --mig POOL=CONFIG plans the pool's config, judged after GPU feature discovery", func(t *testing.T) {
		p := build(t, detection("kubeadm", noNodes), Options{Render: true, Offline: true, MIG: []string{"mixed", "a100=all-balanced"}})
		s := p.Step(MIGStepID)
		if s == nil || s.Kind != KindMIGAfterGFD || !maps.Equal(s.Labels.Pools, map[string]string{"a100": "all-balanced"}) || len(s.Labels.Nodes) != 0 {
			t.Fatalf("MIG step %+v, want the pool's config decided after GPU feature discovery", s)
		}
		if v := operatorLayer(p, MIGSource); at(v, "mig", "strategy") != "mixed" || at(v, "migManager", "enabled") != true {
			t.Errorf("--mig layer %v", v)
		}
		if !strings.Contains(strings.Join(p.Warnings, "\n"), "the GPU nodes of pool a100") {
			t.Errorf("no warning names the pool's nodes: %v", p.Warnings)
		}
	})

	for _, o := range []Options{
		{Sharing: []string{"gpu-pool=time-slicing=4"}},
		{Render: true, Sharing: []string{"gpu-pool=time-slicing=4"}},
		{MIG: []string{"a100=all-1g.10gb"}},
		{Render: true, MIG: []string{"a100=all-1g.10gb"}},
	} {
		flag := "--sharing " + strings.Join(o.Sharing, " ")
		if o.MIG != nil {
			flag = "--mig " + strings.Join(o.MIG, " ")
		}
		t.Run("with a cluster, "+flag+" for an unknown pool is refused (render "+map[bool]string{true: "only", false: "and run"}[o.Render]+")", func(t *testing.T) {
			_, err := Build(Input{Detection: detection("gke", noNodes), Profile: fakeProfiles, Charts: testCharts, Options: o})
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "no GPU node pool") {
				t.Errorf("err = %v, want the unknown pool refused", err)
			}
		})
	}
}
