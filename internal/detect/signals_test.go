package detect

import (
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/distro"
)

// Each platform-unique signal on its own, on a node that shows nothing else, as partial reports do.
func TestEachUniqueSignalNamesItsDistribution(t *testing.T) {
	tests := []struct {
		name         string
		node         nodeOpt
		nodeName     string
		want         string
		wantEvidence string
	}{
		{"an OpenShift kubelet with a bare git hash", info("v1.20.0+bd9e442", "", "", ""), "compute-0", distro.OpenShift, "v1.20.0+bd9e442"},
		{"the RHCOS OS image", info("", "Red Hat Enterprise Linux CoreOS 47.84.202102161611-0 (Ootpa)", "", ""), "n", distro.OpenShift, "CoreOS"},
		{"OpenShift's rhaos CRI-O build", info("", "", "", "cri-o://1.20.0-0.rhaos4.7.gitfdbdf43.el8.52"), "n", distro.OpenShift, "rhaos"},
		{"a GKE accelerator label", labels("cloud.google.com/gke-accelerator", "nvidia-tesla-t4"), "n", distro.GKE, "gke-accelerator"},
		{"a GKE node name", labels(), "gke-dev-pangeo-io-cl-jupyter-gpu-pool-026fa47a-q754", distro.GKE, "gke-dev-pangeo"},
		{"Ubuntu's GKE kernel with a GKE kubelet", info("v1.31.3-gke.1162000", "Ubuntu 22.04.5 LTS", "5.15.0-1071-gke", ""), "n", distro.GKE, "-gke"},
		{"Karpenter's AWS labels", labels("karpenter.k8s.aws/instance-family", "g6"), "n", distro.EKS, "karpenter.k8s.aws/instance-family"},
		{"a Bottlerocket aws-k8s image", info("", "Bottlerocket OS 1.44.0 (aws-k8s-1.33-nvidia)", "", ""), "n", distro.EKS, "aws-k8s"},
		{"an AKS scale-set node name", labels(), "aks-gpu-46663711-vmss000000", distro.AKS, "aks-gpu-46663711-vmss000000"},
		{"an AKS availability-set node name", labels(), "aks-agentpool-33865844-0", distro.AKS, "aks-agentpool"},
		{"an Azure providerID in an MC_ resource group", providerID("azure:///subscriptions/s/resourceGroups/MC_rg_aks_eastus/providers/Microsoft.Compute/virtualMachineScaleSets/aks-np-1-vmss/virtualMachines/0"), "n", distro.AKS, "MC_rg_aks"},
		{"an AKS containerd build", info("v1.20.5", "Ubuntu 18.04.5 LTS", "5.4.0-1046-azure", "containerd://1.4.4+azure"), "n", distro.AKS, "+azure"},
		{"any other kubernetes.azure.com label", labels("kubernetes.azure.com/role", "agent"), "n", distro.AKS, "kubernetes.azure.com/role"},
		{"k3s's older version stamp", info("v1.16.2-k3s.1", "", "", ""), "n", distro.K3s, "v1.16.2-k3s.1"},
		{"a k3s.io label", labels("k3s.io/hostname", "416a100"), "n", distro.K3s, "k3s.io/hostname"},
		{"the +k0s version stamp", info("v1.33.2+k0s", "", "", ""), "worker0", distro.K0s, "+k0s"},
		{"k0s's older -k0s1 stamp", info("v1.20.2-k0s1", "", "", ""), "worker0", distro.K0s, "-k0s1"},
	}
	for _, tc := range tests {
		t.Run(tc.name+" names "+tc.want, func(t *testing.T) {
			r := Analyze(&Snapshot{Nodes: nodes(node(tc.nodeName, tc.node))})
			d := r.Distribution
			if d.Name != tc.want || d.Fallback {
				t.Fatalf("distribution = %s (%d, fallback %v), want %s; candidates: %s", d.Name, d.Confidence, d.Fallback, tc.want, candidateList(r.Candidates))
			}
			if !hasEvidence(d.Evidence, tc.wantEvidence) {
				t.Errorf("evidence lacks %q: %+v", tc.wantEvidence, d.Evidence)
			}
		})
	}
}

// Signals shared by several platforms must not name one on their own.
func TestSharedSignalsAloneFallBack(t *testing.T) {
	tests := []struct {
		name, nodeName string
		node           nodeOpt
		wantHint       string
	}{
		{"an EC2 host name (OpenShift and RKE2 run on EC2 too)", "ip-10-111-61-177.ec2.internal", labels(), "eks"},
		{"an Amazon Linux kernel", "n", info("v1.33.4", "", "6.1.147-172.266.amzn2023.x86_64", ""), "eks"},
		{"Ubuntu's Azure kernel", "n", info("v1.33.4", "Ubuntu 22.04.5 LTS", "5.15.0-1092-azure", ""), "aks"},
		{"the k3s containerd fork (RKE2 uses it too)", "n", info("", "", "", "containerd://1.7.20-k3s1"), "rke2"},
		{"a vSphere providerID", "n", providerID("vsphere://42088343-c508-332d-383c-04ea5f54509d"), "tkgs"},
		{"a GKE-like name without the hash", "gke-node-1", labels(), ""},
		{"an AKS-like name with a short number", "aks-pool-1234-vmss000000", labels(), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name+" falls back with low confidence", func(t *testing.T) {
			r := Analyze(&Snapshot{Nodes: nodes(node(tc.nodeName, tc.node))})
			d := r.Distribution
			if d.Name != distro.Kubeadm || !d.Fallback {
				t.Fatalf("distribution = %s (%d, fallback %v), want a kubeadm fallback; candidates: %s", d.Name, d.Confidence, d.Fallback, candidateList(r.Candidates))
			}
			if !hasEvidence(d.Evidence, "low confidence") {
				t.Errorf("the fallback does not say it is a low-confidence guess: %+v", d.Evidence)
			}
			if tc.wantHint != "" && !hasEvidence(d.Evidence, tc.wantHint+" ") {
				t.Errorf("the fallback does not list the weak hint for %s: %+v", tc.wantHint, d.Evidence)
			}
		})
	}
}

func TestConflictingSignalsAreReported(t *testing.T) {
	t.Run("AKS labels on a node Karpenter's AWS provider labelled too", func(t *testing.T) {
		r := Analyze(&Snapshot{Nodes: nodes(node("aks-gpu-46663711-vmss000000",
			labels("kubernetes.azure.com/cluster", "MC_rg_c_eastus", "karpenter.k8s.aws/instance-family", "g6")))})
		if r.Distribution.Name != distro.AKS {
			t.Fatalf("distribution = %s, want aks (the stronger); candidates: %s", r.Distribution.Name, candidateList(r.Candidates))
		}
		if !hasEvidence(r.Distribution.Evidence, "eks's own signals were seen too") {
			t.Errorf("evidence does not report the conflict: %+v", r.Distribution.Evidence)
		}
		warned := false
		for _, w := range r.Warnings {
			warned = warned || strings.Contains(w, "chose aks, but eks")
		}
		if !warned {
			t.Errorf("no warning about the conflict: %q", r.Warnings)
		}
	})
	t.Run("TKGS built with kubeadm is no conflict", func(t *testing.T) {
		r := Analyze(tkgsCluster())
		if hasEvidence(r.Distribution.Evidence, "seen too") {
			t.Errorf("kubeadm under TKGS reported as a conflict: %+v", r.Distribution.Evidence)
		}
	})
	t.Run("shared Rancher signals on RKE2 are no conflict", func(t *testing.T) {
		r := Analyze(rke2Cluster())
		if hasEvidence(r.Distribution.Evidence, "seen too") {
			t.Errorf("k3s's shared signals reported as a conflict: %+v", r.Distribution.Evidence)
		}
	})
}

func TestGPUFeatureDiscoveryLabelsMarkGPUNodes(t *testing.T) {
	tests := []struct {
		name   string
		labels []string
		want   bool
	}{
		{"GFD's CUDA driver labels", []string{"nvidia.com/cuda.driver.major", "515"}, true},
		{"GFD's GPU count", []string{"nvidia.com/gpu.count", "8"}, true},
		{"a zero GPU count", []string{"nvidia.com/gpu.count", "0"}, false},
		{"the operator's deploy settings alone", []string{"nvidia.com/gpu.deploy.driver", "true", "nvidia.com/gpu.workload.config", "container"}, false},
		{"AWS p2 (K80)", []string{"node.kubernetes.io/instance-type", "p2.xlarge"}, true},
		{"AWS g4ad (AMD)", []string{"node.kubernetes.io/instance-type", "g4ad.xlarge"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := len(gpuReasons(ptrTo(node("n", labels(tc.labels...))))) > 0
			if got != tc.want {
				t.Errorf("GPU node = %v, want %v", got, tc.want)
			}
		})
	}
}

// A distribution's ConfigMap signal counts only for a ConfigMap Gather reads.
func TestConfigMapSignalsNameWhatGatherReads(t *testing.T) {
	for _, d := range distro.All() {
		for _, s := range d.Signals {
			if s.In == distro.ConfigMap && s.Name != kubeadmConfigMap {
				t.Errorf("%s: ConfigMap signal %s: Gather reads only %s", d.Name, s.Name, kubeadmConfigMap)
			}
		}
	}
}
