package detect

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestGPUReasons(t *testing.T) {
	tests := []struct {
		name string
		node corev1.Node
		// want are the Evidence values expected, in order; none means not a GPU node.
		want []string
	}{
		// Before NFD.
		{"a node with no signal is not a GPU node", node("plain"), nil},
		{"nvidia.com/gpu capacity from a running device plugin counts", node("n", gpuCapacity(8)), []string{"nvidia.com/gpu=8"}},
		{"zero nvidia.com/gpu capacity does not count", node("n", gpuCapacity(0)), nil},
		{"nvidia.com/gpu.present from an earlier operator install counts", node("n", labels("nvidia.com/gpu.present", "true")), []string{"nvidia.com/gpu.present=true"}},
		{"GKE's accelerator label counts", node("n", labels("cloud.google.com/gke-accelerator", "nvidia-l4")), []string{"cloud.google.com/gke-accelerator=nvidia-l4"}},
		{"AKS's accelerator label counts", node("n", labels("kubernetes.azure.com/accelerator", "nvidia")), []string{"kubernetes.azure.com/accelerator=nvidia"}},
		{"Karpenter's GPU manufacturer label counts", node("n", labels("karpenter.k8s.aws/instance-gpu-manufacturer", "nvidia")), []string{"karpenter.k8s.aws/instance-gpu-manufacturer=nvidia"}},
		{"Karpenter's AMD GPUs do not count", node("n", labels("karpenter.k8s.aws/instance-gpu-manufacturer", "amd")), nil},
		{"an AWS p4d instance counts", node("n", labels("node.kubernetes.io/instance-type", "p4d.24xlarge")), []string{"p4d.24xlarge"}},
		{"an AWS p6 instance with a dash in its family counts", node("n", labels("node.kubernetes.io/instance-type", "p6-b200.48xlarge")), []string{"p6-b200.48xlarge"}},
		{"an AWS g5g (Graviton + T4G) instance counts", node("n", labels("node.kubernetes.io/instance-type", "g5g.xlarge")), []string{"g5g.xlarge"}},
		{"an AWS g6e instance counts via the beta label", node("n", labels("beta.kubernetes.io/instance-type", "g6e.12xlarge")), []string{"g6e.12xlarge"}},
		{"an AWS g4ad (AMD) instance does not count", node("n", labels("node.kubernetes.io/instance-type", "g4ad.xlarge")), nil},
		{"an AWS m5 instance does not count", node("n", labels("node.kubernetes.io/instance-type", "m5.large")), nil},
		{"a GCE a2 machine counts", node("n", labels("node.kubernetes.io/instance-type", "a2-highgpu-1g")), []string{"a2-highgpu-1g"}},
		{"a GCE g2 machine counts", node("n", labels("node.kubernetes.io/instance-type", "g2-standard-8")), []string{"g2-standard-8"}},
		{"a GCE n1 machine alone does not count (its GPUs are attached separately)", node("n", labels("node.kubernetes.io/instance-type", "n1-standard-4")), nil},
		{"an Azure NC A100 size counts", node("n", labels("node.kubernetes.io/instance-type", "Standard_NC24ads_A100_v4")), []string{"Standard_NC24ads_A100_v4"}},
		{"an Azure NCasT4 size counts", node("n", labels("node.kubernetes.io/instance-type", "Standard_NC4as_T4_v3")), []string{"Standard_NC4as_T4_v3"}},
		{"an Azure NVv4 (AMD) size does not count", node("n", labels("node.kubernetes.io/instance-type", "Standard_NV4as_v4")), nil},
		{"an Azure ND MI300X (AMD) size does not count", node("n", labels("node.kubernetes.io/instance-type", "Standard_ND96isr_MI300X_v5")), nil},
		{"RKE2's instance-type placeholder does not count", node("n", labels("node.kubernetes.io/instance-type", "rke2")), nil},

		// After NFD.
		{"the GPU operator's NFD label pci-10de counts", node("n", labels("feature.node.kubernetes.io/pci-10de.present", "true")), []string{"feature.node.kubernetes.io/pci-10de.present=true"}},
		{"upstream NFD's 3D-controller label counts", node("n", labels("feature.node.kubernetes.io/pci-0302_10de.present", "true")), []string{"feature.node.kubernetes.io/pci-0302_10de.present=true"}},
		{"upstream NFD's VGA label counts", node("n", labels("feature.node.kubernetes.io/pci-0300_10de.present", "true")), []string{"feature.node.kubernetes.io/pci-0300_10de.present=true"}},
		{"a label with the device ID counts", node("n", labels("feature.node.kubernetes.io/pci-0302_10de_20b0.present", "true")), []string{"feature.node.kubernetes.io/pci-0302_10de_20b0.present=true"}},
		{"an NVSwitch (class 0680) alone is not a GPU", node("n", labels("feature.node.kubernetes.io/pci-0680_10de.present", "true")), nil},
		{"another vendor's GPU does not count", node("n", labels("feature.node.kubernetes.io/pci-0300_1002.present", "true", "feature.node.kubernetes.io/pci-8086.present", "true")), nil},
		{"a PCI label that is not true does not count", node("n", labels("feature.node.kubernetes.io/pci-10de.present", "false")), nil},
		{
			"every reason is listed, strongest first",
			node("n", gpuCapacity(1), labels("nvidia.com/gpu.present", "true", "feature.node.kubernetes.io/pci-10de.present", "true",
				"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB", "node.kubernetes.io/instance-type", "p4d.24xlarge")),
			[]string{"nvidia.com/gpu=1", "nvidia.com/gpu.present=true", "feature.node.kubernetes.io/pci-10de.present=true", "nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB", "p4d.24xlarge"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range gpuReasons(&tc.node) {
				if e.Source == "" {
					t.Errorf("reason %q has no source", e.Value)
				}
				got = append(got, e.Value)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("reasons = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestGPUNodesBeforeAndAfterNFD(t *testing.T) {
	t.Run("on bare-metal RKE2 the GPU is invisible until NFD runs", func(t *testing.T) {
		r := Analyze(rke2Cluster())
		if len(r.GPUNodes) != 0 {
			t.Fatalf("GPU nodes = %+v, want none before NFD", r.GPUNodes)
		}
	})
	t.Run("after NFD and GFD the same node is a GPU node with its product", func(t *testing.T) {
		s := rke2Cluster()
		// The labels a single-node RKE2 cluster shows after NFD and GPU feature discovery ran.
		labels("feature.node.kubernetes.io/pci-10de.present", "true", "feature.node.kubernetes.io/pci-8086.present", "true",
			"feature.node.kubernetes.io/system-os_release.ID", "ubuntu", "nvidia.com/gpu.count", "1", "nvidia.com/gpu.product", "NVIDIA-GeForce-MX150")(&s.Nodes[0])
		r := Analyze(s)
		if len(r.GPUNodes) != 1 {
			t.Fatalf("GPU nodes = %+v, want dxlab-nb-00", r.GPUNodes)
		}
		g := r.GPUNodes[0]
		if g.Name != "dxlab-nb-00" || g.GPUs != 1 || g.Product != "NVIDIA-GeForce-MX150" || !g.ControlPlane {
			t.Errorf("GPU node = %+v", g)
		}
		if !hasEvidence(g.Reasons, "pci-10de") {
			t.Errorf("reasons = %+v, want the NFD PCI label", g.Reasons)
		}
		if r.Nodes.NFDLabelled != 1 || r.Existing.NFD.LabelledNodes != 1 {
			t.Errorf("NFD labelled = %d/%d, want 1", r.Nodes.NFDLabelled, r.Existing.NFD.LabelledNodes)
		}
	})
	t.Run("GKE's GPU node counts by capacity and accelerator label and knows its pool and host driver", func(t *testing.T) {
		r := Analyze(gkeCluster())
		if len(r.GPUNodes) != 1 {
			t.Fatalf("GPU nodes = %+v", r.GPUNodes)
		}
		g := r.GPUNodes[0]
		if g.Pool != "sample-gpu-pool" || g.GPUs != 1 || g.Product != "nvidia-tesla-t4" || !g.Tainted {
			t.Errorf("GPU node = %+v", g)
		}
		if g.HostDriver == "" {
			t.Errorf("HostDriver empty, want GKE's managed driver (gke-gpu-driver-version label)")
		}
	})
	t.Run("EKS's GPU nodes count by instance type", func(t *testing.T) {
		r := Analyze(eksCluster())
		if len(r.GPUNodes) != 2 {
			t.Fatalf("GPU nodes = %+v, want the two g5.xlarge nodes", r.GPUNodes)
		}
		for _, g := range r.GPUNodes {
			if g.Pool != "gpu" || g.InstanceType != "g5.xlarge" {
				t.Errorf("GPU node = %+v", g)
			}
		}
	})
	t.Run("Karpenter's labels give the GPU count and name", func(t *testing.T) {
		r := Analyze(eksBottlerocketCluster())
		if len(r.GPUNodes) != 1 || r.GPUNodes[0].GPUs != 1 || r.GPUNodes[0].Product != "l4" {
			t.Fatalf("GPU nodes = %+v", r.GPUNodes)
		}
	})
	t.Run("a host driver found by the operator is reported per node and in Existing", func(t *testing.T) {
		s := kubeadmCluster()
		labels("nvidia.com/gpu.present", "true", "nvidia.com/gpu.deploy.driver", "pre-installed")(&s.Nodes[1])
		r := Analyze(s)
		if len(r.GPUNodes) != 1 || r.GPUNodes[0].HostDriver == "" {
			t.Fatalf("GPU nodes = %+v, want gpu-1 with a host driver", r.GPUNodes)
		}
		if !reflect.DeepEqual(r.Existing.HostDriverNodes, []string{"gpu-1"}) {
			t.Errorf("HostDriverNodes = %v", r.Existing.HostDriverNodes)
		}
	})
}
