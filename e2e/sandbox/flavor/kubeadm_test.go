package flavor

import (
	"testing"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

func TestKubeadmExtraGPUNodesAreASecondGPUPool(t *testing.T) {
	for _, tc := range []struct {
		name    string
		s       Scenario
		want    map[string]string // node name → GPU product
		cpuOnly []string
	}{
		{"the default has only H100 workers", Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1},
			map[string]string{"gpu-worker-1": standin.GPUH100SXM80, "gpu-worker-2": standin.GPUH100SXM80}, []string{"kube-cp-1", "cpu-worker-1"}},
		{"extra nodes are L4 by default and named on", Scenario{Distro: "kubeadm", GPUNodes: 2, ExtraGPUNodes: 1},
			map[string]string{"gpu-worker-1": standin.GPUH100SXM80, "gpu-worker-2": standin.GPUH100SXM80, "gpu-worker-3": standin.GPUL4}, []string{"kube-cp-1"}},
		{"the extra product is the scenario's", Scenario{Distro: "kubeadm", GPUNodes: 1, ExtraGPUNodes: 1, ExtraGPUProduct: standin.GPUA100SXM40, GPUsPerNode: 4},
			map[string]string{"gpu-worker-1": standin.GPUH100SXM80, "gpu-worker-2": standin.GPUA100SXM40}, []string{"kube-cp-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := For("kubeadm")
			if err != nil {
				t.Fatal(err)
			}
			nodes := f.Nodes(tc.s)
			got := map[string]string{}
			var cpu []string
			for _, n := range nodes {
				if n.Hardware.GPUs == 0 {
					cpu = append(cpu, n.Node.Name)
					continue
				}
				got[n.Node.Name] = n.Hardware.GPUProduct
				if want := tc.s.Defaults().GPUsPerNode; n.Hardware.GPUs != want {
					t.Errorf("%s has %d GPUs, want %d", n.Node.Name, n.Hardware.GPUs, want)
				}
			}
			if len(got) != len(tc.want) || len(cpu) != len(tc.cpuOnly) {
				t.Fatalf("GPU nodes %v and others %v, want %v and %v", got, cpu, tc.want, tc.cpuOnly)
			}
			for name, product := range tc.want {
				if got[name] != product {
					t.Errorf("%s: %q, want %q", name, got[name], product)
				}
			}
		})
	}
}
