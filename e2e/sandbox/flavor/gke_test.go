package flavor

import (
	"testing"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

func TestGKEExtraGPUNodesAreAnL4Pool(t *testing.T) {
	f, err := For("gke")
	if err != nil {
		t.Fatal(err)
	}
	pools := map[string]map[string]int{} // pool → GPU product → nodes
	for _, n := range f.Nodes(Scenario{Distro: "gke", GPUNodes: 2, ExtraGPUNodes: 1, CPUNodes: 1}) {
		pool := n.Node.Labels["cloud.google.com/gke-nodepool"]
		if pools[pool] == nil {
			pools[pool] = map[string]int{}
		}
		pools[pool][n.Hardware.GPUProduct]++
		if pool == "l4-pool" && n.Node.Labels["cloud.google.com/gke-accelerator"] != "nvidia-l4" {
			t.Errorf("%s: accelerator %q, want nvidia-l4", n.Node.Name, n.Node.Labels["cloud.google.com/gke-accelerator"])
		}
	}
	want := map[string]map[string]int{
		"default-pool": {"": 1},
		"gpu-pool":     {standin.GPUA100SXM40: 2},
		"l4-pool":      {standin.GPUL4: 1},
	}
	for pool, products := range want {
		for product, count := range products {
			if pools[pool][product] != count {
				t.Errorf("pool %s: %d nodes of %q, want %d (pools %v)", pool, pools[pool][product], product, count, pools)
			}
		}
	}
	if len(pools) != len(want) {
		t.Errorf("pools %v, want %v", pools, want)
	}
}
