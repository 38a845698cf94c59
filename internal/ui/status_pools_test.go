package ui

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/engine"
)

func TestPrintStatusPools(t *testing.T) {
	tests := []struct {
		name  string
		res   *engine.StatusResult
		wants []string
	}{
		{
			name: "a device-plugin stack shows each pool's sharing, MIG and what it advertises",
			res: &engine.StatusResult{Installed: true, Healthy: true,
				Nodes: []engine.NodeStatus{{Name: "a1", Pool: "gpu-pool"}, {Name: "l1", Pool: "l4-pool"}},
				Pools: []engine.PoolStatus{
					{Name: "gpu-pool", Nodes: []string{"a1", "a2"}, DevicePluginConfig: "time-slicing-4", Sharing: "time-slicing", Replicas: 4,
						MIGStrategy: "mixed", MIGConfig: "all-1g.5gb", MIGConfigState: "success", Advertised: map[string]int64{"nvidia.com/mig-1g.5gb": 56, "nvidia.com/gpu": 0}},
					{Name: "l4-pool", Nodes: []string{"l1"}, Sharing: "none", Replicas: 1, Advertised: map[string]int64{"nvidia.com/gpu": 1}},
				}},
			wants: []string{"POOL", "SHARING", "MIG STATE", "ADVERTISED",
				"gpu-pool  2      time-slicing-4  time-slicing  4         mixed         all-1g.5gb  success    nvidia.com/gpu=0, nvidia.com/mig-1g.5gb=56",
				"l4-pool   1      -               none          1         -             -           -          nvidia.com/gpu=1"},
		},
		{
			name: "a DRA stack shows each pool's kubelet plugins and what they publish",
			res: &engine.StatusResult{Installed: true, Healthy: true,
				Nodes: []engine.NodeStatus{{Name: "a1", Pool: "gpu-pool", DRADriver: "Ready"}},
				Pools: []engine.PoolStatus{{Name: "gpu-pool", Nodes: []string{"a1"}, DRADriver: "1/1 Ready", ResourceSlices: 1, Devices: 8}}},
			wants: []string{"POOL      NODES  DRA DRIVER  RESOURCESLICES  DEVICES", "gpu-pool  1      1/1 Ready   1               8"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := PrintStatus(&b, tt.res, Style{}); err != nil {
				t.Fatal(err)
			}
			for _, want := range tt.wants {
				if !strings.Contains(b.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, b.String())
				}
			}
		})
	}
}
