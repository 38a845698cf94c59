package detect

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPools(t *testing.T) {
	t.Run("GKE nodes are grouped by their node-pool label", func(t *testing.T) {
		r := Analyze(gkeCluster())
		if len(r.Pools) != 2 {
			t.Fatalf("pools = %+v", r.Pools)
		}
		gpu := pool(r, "sample-gpu-pool")
		if gpu == nil || gpu.Label != "cloud.google.com/gke-nodepool=sample-gpu-pool" || gpu.Count != 1 || gpu.GPUNodes != 1 {
			t.Fatalf("gpu pool = %+v", gpu)
		}
		if gpu.OS != "cos" || !reflect.DeepEqual(gpu.Runtimes, []string{"containerd://2.0.4"}) || !reflect.DeepEqual(gpu.Kernels, []string{"6.6.87+"}) {
			t.Errorf("gpu pool facts = %+v", gpu)
		}
		if !reflect.DeepEqual(gpu.Taints, []string{"nvidia.com/gpu=present:NoSchedule"}) {
			t.Errorf("taints = %v", gpu.Taints)
		}
		if !anyNote(gpu, "does not support cos") || !anyNote(gpu, "own device plugin") {
			t.Errorf("notes = %v, want the COS driver-container note and GKE's device plugin note", gpu.Notes)
		}
		if def := pool(r, "default-pool"); def == nil || def.GPUNodes != 0 || len(def.Notes) != 0 {
			t.Errorf("default pool = %+v", def)
		}
	})
	t.Run("kubeadm nodes without pool labels are grouped by role, GPU, instance type, OS and runtime", func(t *testing.T) {
		s := kubeadmCluster()
		labels("feature.node.kubernetes.io/pci-10de.present", "true")(&s.Nodes[1])
		s.Nodes = append(s.Nodes, node("gpu-2", labels("feature.node.kubernetes.io/pci-10de.present", "true"),
			info("v1.33.4", "Ubuntu 24.04.3 LTS", "6.8.0-79-generic", "containerd://2.1.4")))
		r := Analyze(s)
		var names []string
		for _, p := range r.Pools {
			names = append(names, p.Name)
			if p.Label != "" {
				t.Errorf("pool %s has label %q, want inferred", p.Name, p.Label)
			}
		}
		if !reflect.DeepEqual(names, []string{"control-plane", "worker", "worker-gpu"}) {
			t.Fatalf("pools = %v", names)
		}
		if p := pool(r, "worker-gpu"); p.Count != 2 || p.GPUNodes != 2 || p.OS != "ubuntu" {
			t.Errorf("worker-gpu = %+v", p)
		}
	})
	t.Run("GPU servers without an instance type are pools by GPU product", func(t *testing.T) {
		gpuInfo := info("v1.33.4", "Ubuntu 24.04.3 LTS", "6.8", "containerd://2.1.4")
		r := Analyze(&Snapshot{Nodes: nodes(
			node("h-1", labels("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"), gpuInfo),
			node("h-2", labels("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"), gpuInfo),
			node("l-1", labels("nvidia.com/gpu.product", "NVIDIA-L4"), gpuInfo),
		)})
		got := map[string]string{}
		for _, g := range r.GPUNodes {
			got[g.Name] = g.Pool
		}
		want := map[string]string{"h-1": "worker-gpu-NVIDIA-H100-80GB-HBM3", "h-2": "worker-gpu-NVIDIA-H100-80GB-HBM3", "l-1": "worker-gpu-NVIDIA-L4"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("pools by node %v, want %v", got, want)
		}
	})
	t.Run("inferred pools that differ only in OS image get distinct names", func(t *testing.T) {
		r := Analyze(&Snapshot{Nodes: nodes(
			node("a", info("v1.33.4", "Ubuntu 22.04.5 LTS", "5.15", "containerd://1.7.27")),
			node("b", info("v1.33.4", "Ubuntu 24.04.3 LTS", "6.8", "containerd://1.7.27")),
		)})
		if len(r.Pools) != 2 || r.Pools[0].Name == r.Pools[1].Name {
			t.Fatalf("pools = %+v", r.Pools)
		}
	})
	t.Run("EKS Amazon Linux GPU pools say NVIDIA supports only the device plugin there", func(t *testing.T) {
		r := Analyze(eksCluster())
		if p := pool(r, "gpu"); p == nil || !anyNote(p, "device plugin") || p.OS != "amzn" {
			t.Fatalf("gpu pool = %+v", p)
		}
	})
	t.Run("AKS GPU pools say the driver may already be installed", func(t *testing.T) {
		r := Analyze(aksCluster())
		if p := pool(r, "gpupool"); p == nil || !anyNote(p, "--gpu-driver none") {
			t.Fatalf("gpupool = %+v", p)
		}
	})
	t.Run("an old containerd on a GPU pool is called out", func(t *testing.T) {
		s := tkgsCluster()
		labels("feature.node.kubernetes.io/pci-10de.present", "true")(&s.Nodes[2])
		r := Analyze(s)
		var gpuPool *Pool
		for i := range r.Pools {
			if r.Pools[i].GPUNodes > 0 {
				gpuPool = &r.Pools[i]
			}
		}
		if gpuPool == nil || !anyNote(gpuPool, "containerd 1.4.6 is older than 1.7") {
			t.Fatalf("gpu pool = %+v", gpuPool)
		}
	})
}

func TestScheduling(t *testing.T) {
	gpuWorker := func(name string, extra ...nodeOpt) corev1.Node {
		return node(name, append([]nodeOpt{labels("nvidia.com/gpu.present", "true")}, extra...)...)
	}
	tests := []struct {
		name        string
		nodes       []corev1.Node
		wantAllGPU  bool
		wantOpen    []string
		wantGPUWork []string
	}{
		{
			name:        "a cluster with an untainted CPU worker is safe to taint",
			nodes:       nodes(node("cp", kubeadmControlPlane()), gpuWorker("gpu-1"), node("cpu-1")),
			wantOpen:    []string{"cpu-1"},
			wantGPUWork: []string{"gpu-1"},
		},
		{
			name:        "a cluster whose only workers have GPUs needs tolerations",
			nodes:       nodes(node("cp", kubeadmControlPlane()), gpuWorker("gpu-1"), gpuWorker("gpu-2")),
			wantAllGPU:  true,
			wantGPUWork: []string{"gpu-1", "gpu-2"},
		},
		{
			name:        "a tainted CPU worker is no refuge",
			nodes:       nodes(gpuWorker("gpu-1"), node("infra-1", taint("dedicated", "infra", corev1.TaintEffectNoSchedule))),
			wantAllGPU:  true,
			wantGPUWork: []string{"gpu-1"},
		},
		{
			name:        "a PreferNoSchedule taint still leaves room",
			nodes:       nodes(gpuWorker("gpu-1"), node("cpu-1", taint("soft", "", corev1.TaintEffectPreferNoSchedule))),
			wantOpen:    []string{"cpu-1"},
			wantGPUWork: []string{"gpu-1"},
		},
		{
			name:        "a cordoned CPU worker is no refuge",
			nodes:       nodes(gpuWorker("gpu-1"), node("cpu-1", cordoned())),
			wantAllGPU:  true,
			wantGPUWork: []string{"gpu-1"},
		},
		{
			name:  "a cluster with no GPU worker is not all-GPU",
			nodes: nodes(node("cp", kubeadmControlPlane()), gpuWorker("cp-gpu", kubeadmControlPlane())),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Analyze(&Snapshot{Nodes: tc.nodes})
			s := r.Scheduling
			if s.AllWorkersGPU != tc.wantAllGPU || !reflect.DeepEqual(s.OpenWorkers, tc.wantOpen) || !reflect.DeepEqual(s.GPUWorkers, tc.wantGPUWork) {
				t.Errorf("scheduling = %+v, want allGPU=%v open=%v gpu=%v", s, tc.wantAllGPU, tc.wantOpen, tc.wantGPUWork)
			}
		})
	}
}

func pool(r Result, name string) *Pool {
	for i := range r.Pools {
		if r.Pools[i].Name == name {
			return &r.Pools[i]
		}
	}
	return nil
}

func anyNote(p *Pool, sub string) bool {
	for _, n := range p.Notes {
		if strings.Contains(n, sub) {
			return true
		}
	}
	return false
}
