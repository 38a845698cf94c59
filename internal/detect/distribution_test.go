package detect

import (
	"strconv"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/distro"
	corev1 "k8s.io/api/core/v1"
)

func TestAnalyzePicksTheDistribution(t *testing.T) {
	tests := []struct {
		name         string
		snapshot     *Snapshot
		want         string
		wantVersion  string
		wantFallback bool
		// wantEvidence are substrings of Evidence values the winner must cite.
		wantEvidence []string
	}{
		{
			name:         "OpenShift is known by its API groups, node labels and ClusterVersion",
			snapshot:     openshiftCluster(),
			want:         distro.OpenShift,
			wantVersion:  "4.18.9",
			wantEvidence: []string{"config.openshift.io", "node.openshift.io/os_id=rhcos", "4.18.9"},
		},
		{
			name: "OpenShift is known by its API group even when its nodes carry no OpenShift labels",
			snapshot: &Snapshot{
				Nodes:     nodes(node("worker-0", info("v1.31.7", "Red Hat Enterprise Linux 9.4", "5.14.0", "cri-o://1.31.6"))),
				APIGroups: []string{"config.openshift.io", "security.openshift.io"},
			},
			want:         distro.OpenShift,
			wantEvidence: []string{"config.openshift.io"},
		},
		{
			name:         "GKE is known by its node-pool label, version stamp and gce providerID",
			snapshot:     gkeCluster(),
			want:         distro.GKE,
			wantVersion:  "v1.33.4-gke.1172000",
			wantEvidence: []string{"cloud.google.com/gke-nodepool=", "v1.33.4-gke.1172000", "gce://my-project/us-central1-a/"},
		},
		{
			name:         "EKS is known by its node-group label and version stamp",
			snapshot:     eksCluster(),
			want:         distro.EKS,
			wantVersion:  "v1.33.4-eks-3025e55",
			wantEvidence: []string{"eks.amazonaws.com/", "-eks-", "aws:///"},
		},
		{
			name:         "EKS with Karpenter and Bottlerocket is known from the nodes alone",
			snapshot:     eksBottlerocketCluster(),
			want:         distro.EKS,
			wantVersion:  "v1.33.1-eks-b9364f6",
			wantEvidence: []string{"karpenter.k8s.aws/", "Bottlerocket OS 1.44.0 (aws-k8s-1.33-nvidia)", "v1.33.1-eks-b9364f6"},
		},
		{
			name:         "AKS is known by its kubernetes.azure.com labels",
			snapshot:     aksCluster(),
			want:         distro.AKS,
			wantVersion:  "v1.33.2",
			wantEvidence: []string{"kubernetes.azure.com/cluster=MC_rg-gpu_aks-gpu_eastus", "azure:///subscriptions/"},
		},
		{
			name:         "TKGS wins over kubeadm although Cluster API left kubeadm-config behind",
			snapshot:     tkgsCluster(),
			want:         distro.TKGS,
			wantVersion:  "v1.20.8_vmware.1-tkg.2",
			wantEvidence: []string{"run.tanzu.vmware.com/kubernetesDistributionVersion=v1.20.8_vmware.1-tkg.2", "v1.20.8+vmware.1", "guest-cluster-cloud-provider"},
		},
		{
			name:         "RKE2 is known by its annotations, version stamp and instance-type label",
			snapshot:     rke2Cluster(),
			want:         distro.RKE2,
			wantVersion:  "v1.24.9+rke2r2",
			wantEvidence: []string{"rke2.io/", "v1.24.9+rke2r2", "node.kubernetes.io/instance-type=rke2", "containerd://1.6.12-k3s1"},
		},
		{
			name:         "k3s is told from RKE2 by its own annotations and version stamp",
			snapshot:     k3sCluster(),
			want:         distro.K3s,
			wantVersion:  "v1.31.5+k3s1",
			wantEvidence: []string{"k3s.io/", "v1.31.5+k3s1", "node.kubernetes.io/instance-type=k3s"},
		},
		{
			name:         "MicroK8s is known by its node labels",
			snapshot:     microk8sCluster(),
			want:         distro.MicroK8s,
			wantEvidence: []string{"microk8s.io/cluster=true"},
		},
		{
			name:         "k0s is known by its role label",
			snapshot:     k0sCluster(),
			want:         distro.K0s,
			wantVersion:  "v1.33.3+k0s",
			wantEvidence: []string{"node.k0sproject.io/role=worker"},
		},
		{
			name:         "kubeadm is known by its kubeadm-config ConfigMap",
			snapshot:     kubeadmCluster(),
			want:         distro.Kubeadm,
			wantVersion:  "v1.33.4",
			wantEvidence: []string{"kube-system/kubeadm-config"},
		},
		{
			name: "kubeadm on GCE is not GKE: a gce providerID alone is not enough",
			snapshot: func() *Snapshot {
				s := kubeadmCluster()
				for i := range s.Nodes {
					s.Nodes[i].Spec.ProviderID = "gce://my-project/europe-west4-a/" + s.Nodes[i].Name
				}
				return s
			}(),
			want:         distro.Kubeadm,
			wantEvidence: []string{"kube-system/kubeadm-config"},
		},
		{
			name: "RKE2 on AWS is RKE2, not EKS",
			snapshot: func() *Snapshot {
				s := rke2Cluster()
				s.Nodes[0].Spec.ProviderID = "aws:///eu-west-1a/i-0123456789abcdef0"
				return s
			}(),
			want:         distro.RKE2,
			wantEvidence: []string{"rke2.io/"},
		},
		{
			name: "RKE2 and k3s with only their shared signals resolve to RKE2, which shares k3s's socket",
			snapshot: &Snapshot{
				Nodes:     nodes(node("node-a", info("v1.31.5", "Ubuntu 24.04.1 LTS", "6.8.0", "containerd://1.7.23-k3s2"))),
				APIGroups: []string{"helm.cattle.io", "k3s.cattle.io"},
			},
			want:         distro.RKE2,
			wantEvidence: []string{"containerd://1.7.23-k3s2", "helm.cattle.io"},
		},
		{
			name: "a cluster with no signal at all falls back to kubeadm",
			snapshot: &Snapshot{
				Nodes:    nodes(node("n1", info("v1.33.0", "Debian GNU/Linux 12 (bookworm)", "6.1.0", "containerd://1.7.24"))),
				Warnings: []string{"read ConfigMap kube-system/kubeadm-config: forbidden"},
			},
			want:         distro.Kubeadm,
			wantFallback: true,
			wantEvidence: []string{"no distribution-specific detector"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Analyze(tc.snapshot)
			d := r.Distribution
			if d.Name != tc.want {
				t.Fatalf("distribution = %s (%d), want %s; candidates: %s", d.Name, d.Confidence, tc.want, candidateList(r.Candidates))
			}
			if d.Fallback != tc.wantFallback {
				t.Errorf("fallback = %v, want %v", d.Fallback, tc.wantFallback)
			}
			if !tc.wantFallback && d.Confidence < MinConfidence {
				t.Errorf("confidence = %d, want at least %d", d.Confidence, MinConfidence)
			}
			if tc.wantVersion != "" && d.Version != tc.wantVersion {
				t.Errorf("version = %q, want %q", d.Version, tc.wantVersion)
			}
			for _, want := range tc.wantEvidence {
				if !hasEvidence(d.Evidence, want) {
					t.Errorf("evidence lacks %q; got %+v", want, d.Evidence)
				}
			}
			for i := 1; i < len(r.Candidates); i++ {
				if r.Candidates[i-1].Confidence < r.Candidates[i].Confidence {
					t.Errorf("candidates not sorted: %s", candidateList(r.Candidates))
				}
			}
		})
	}
}

func TestAmbiguousClustersKeepTheRunnerUp(t *testing.T) {
	t.Run("shared Rancher signals score RKE2 and k3s equally", func(t *testing.T) {
		r := Analyze(&Snapshot{
			Nodes:     nodes(node("node-a", info("v1.31.5", "Ubuntu", "6.8.0", "containerd://1.7.23-k3s2"))),
			APIGroups: []string{"helm.cattle.io", "k3s.cattle.io"},
		})
		rke2, k3s := candidate(r, distro.RKE2), candidate(r, distro.K3s)
		if rke2 == nil || k3s == nil || rke2.Confidence != k3s.Confidence {
			t.Fatalf("want equal rke2 and k3s candidates, got %s", candidateList(r.Candidates))
		}
	})
	t.Run("TKGS keeps kubeadm as a strong runner-up", func(t *testing.T) {
		r := Analyze(tkgsCluster())
		if kubeadm := candidate(r, distro.Kubeadm); kubeadm == nil || kubeadm.Confidence < 80 {
			t.Fatalf("kubeadm candidate = %+v, want ≥ 80 from kubeadm-config", kubeadm)
		}
	})
	t.Run("OpenShift on AWS shows the aws providerID as a weak EKS candidate", func(t *testing.T) {
		r := Analyze(openshiftCluster())
		if eks := candidate(r, distro.EKS); eks == nil || eks.Confidence >= MinConfidence {
			t.Fatalf("eks candidate = %+v, want present and below %d", eks, MinConfidence)
		}
	})
}

func TestVersions(t *testing.T) {
	r := Analyze(gkeCluster())
	if r.KubernetesVersion != "v1.33.4-gke.1172000" {
		t.Errorf("KubernetesVersion = %q", r.KubernetesVersion)
	}
	if len(r.KubeletVersions) != 1 || r.KubeletVersions[0] != "v1.33.4-gke.1172000" {
		t.Errorf("KubeletVersions = %v", r.KubeletVersions)
	}
}

func TestAutopilot(t *testing.T) {
	tests := []struct {
		name string
		node corev1.Node
		want bool
	}{
		{
			name: "a node with the Autopilot label is Autopilot",
			node: node("gk3-autopilot-1-pool-2-1a2b3c4d-x7k9", labels("cloud.google.com/gke-nodepool", "pool-2", "cloud.google.com/gke-autopilot", ""),
				info("v1.33.4-gke.1172000", "Container-Optimized OS from Google", "6.6.87+", "containerd://2.0.4")),
			want: true,
		},
		{
			name: "a Standard node is not Autopilot",
			node: node("gke-std-default-pool-1a2b3c4d-x7k9", labels("cloud.google.com/gke-nodepool", "default-pool"),
				info("v1.33.4-gke.1172000", "Container-Optimized OS from Google", "6.6.87+", "containerd://2.0.4")),
			want: false,
		},
		{
			name: "gk3- node names alone are Autopilot's naming",
			node: node("gk3-autopilot-1-pool-2-1a2b3c4d-x7k9", labels("cloud.google.com/gke-nodepool", "pool-2"),
				info("v1.33.4-gke.1172000", "Container-Optimized OS from Google", "6.6.87+", "containerd://2.0.4")),
			want: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Analyze(&Snapshot{Nodes: nodes(tc.node), ServerVersion: serverVersion("v1.33.4-gke.1172000")})
			if r.Distribution.Name != distro.GKE || r.Autopilot == nil {
				t.Fatalf("distribution = %s, autopilot = %v", r.Distribution.Name, r.Autopilot)
			}
			if r.Autopilot.Detected != tc.want {
				t.Errorf("autopilot = %v, want %v (evidence %+v)", r.Autopilot.Detected, tc.want, r.Autopilot.Evidence)
			}
			warned := strings.Contains(strings.Join(r.Warnings, "\n"), "Autopilot")
			if warned != tc.want {
				t.Errorf("Autopilot warning = %v, want %v", warned, tc.want)
			}
		})
	}
}

func TestConfidenceCombinesIndependentSignals(t *testing.T) {
	tests := []struct {
		name    string
		weights []int
		want    int
	}{
		{"no evidence is zero", nil, 0},
		{"one signal is its weight", []int{70}, 70},
		{"two signals add up without passing 100", []int{70, 30}, 79},
		{"a certain signal is certain", []int{100, 10}, 100},
		{"out-of-range weights are clamped", []int{150, -20}, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ev []Evidence
			for _, w := range tc.weights {
				ev = append(ev, Evidence{Weight: w})
			}
			if got := confidence(ev); got != tc.want {
				t.Errorf("confidence(%v) = %d, want %d", tc.weights, got, tc.want)
			}
		})
	}
}

func hasEvidence(ev []Evidence, sub string) bool {
	for _, e := range ev {
		if strings.Contains(e.Value, sub) || strings.Contains(e.Source, sub) {
			return true
		}
	}
	return false
}

func candidate(r Result, name string) *Candidate {
	for i := range r.Candidates {
		if r.Candidates[i].Name == name {
			return &r.Candidates[i]
		}
	}
	return nil
}

func candidateList(cs []Candidate) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, c.Name+"="+strconv.Itoa(c.Confidence))
	}
	return strings.Join(parts, ", ")
}
