package distro

import (
	"slices"
	"strings"
	"testing"
)

// weights are the weights of d's signals in in that match value, in declaration order.
func weights(d Distribution, in Where, value string) []int {
	var out []int
	for _, s := range d.Signals {
		if s.In == in && s.Match.Matches(value) {
			out = append(out, s.Weight)
		}
	}
	return out
}

// The examples each distribution's comments cite (and their near misses), against the signals that
// look at text: which signals match, by weight.
func TestTextSignalsMatchTheirExamples(t *testing.T) {
	tests := []struct {
		name   string
		distro string
		in     Where
		value  string
		want   []int
	}{
		{"OpenShift's kubelet with a bare git hash", OpenShift, Version, "v1.20.0+bd9e442", []int{60}},
		{"a k0s stamp is no git hash", OpenShift, Version, "v1.33.2+k0s", nil},
		{"an upper-case hash is no OpenShift build", OpenShift, Version, "v1.20.0+BD9E442", nil},
		{"six hex digits are too few", OpenShift, Version, "v1.20.0+bd9e44", nil},
		{"RHCOS", OpenShift, OSImage, "Red Hat Enterprise Linux CoreOS 47.84.202102161611-0 (Ootpa)", []int{60}},
		{"OpenShift's rhaos CRI-O build", OpenShift, Runtime, "cri-o://1.20.0-0.rhaos4.7.gitfdbdf43.el8.52", []int{60}},
		{"another CRI-O build is a weak hint", OpenShift, Runtime, "cri-o://1.31.6", []int{10}},
		{"containerd is not CRI-O", OpenShift, Runtime, "containerd://1.7.27", nil},
		{"GKE's version stamp", GKE, Version, "v1.33.4-gke.1172000", []int{70}},
		{"Ubuntu's GKE kernel", GKE, Kernel, "5.15.0-1071-gke", []int{50}},
		{"Container-Optimized OS", GKE, OSImage, "Container-Optimized OS from Google", []int{40}},
		{"a gce providerID", GKE, ProviderID, "gce://my-project/us-central1-a/gke-node", []int{30}},
		{"a GKE VM name", GKE, NodeName, "gke-my-gpu-cluster-default-pool-4d0fa82d-ttxh", []int{60}},
		{"EKS's version stamp", EKS, Version, "v1.33.4-eks-3025e55", []int{70}},
		{"Bottlerocket's aws-k8s variant", EKS, OSImage, "Bottlerocket OS 1.44.0 (aws-k8s-1.33-nvidia)", []int{60}},
		{"Bottlerocket's VMware variant", EKS, OSImage, "Bottlerocket OS 1.44.0 (vmware-k8s-1.33)", nil},
		{"Amazon Linux", EKS, OSImage, "Amazon Linux 2023.8.20250818", []int{20}},
		{"an Amazon Linux kernel", EKS, Kernel, "6.1.147-172.266.amzn2023.x86_64", []int{20}},
		{"an EC2 host name", EKS, NodeName, "ip-10-0-114-53.ec2.internal", []int{20}},
		{"an aws providerID", EKS, ProviderID, "aws:///us-east-1a/i-0123456789abcdef0", []int{30}},
		{"an Azure providerID in an MC_ resource group", AKS, ProviderID, "azure:///subscriptions/s/resourceGroups/MC_rg_aks_eastus/providers/x", []int{70}},
		{"an Azure providerID in a lower-case mc_ group", AKS, ProviderID, "azure:///subscriptions/s/resourcegroups/mc_rg_aks_eastus/providers/x", []int{70}},
		{"an Azure providerID elsewhere", AKS, ProviderID, "azure:///subscriptions/s/resourceGroups/rg/providers/x", []int{30}},
		{"AKS's containerd build", AKS, Runtime, "containerd://1.4.4+azure", []int{60}},
		{"Ubuntu's Azure kernel", AKS, Kernel, "5.4.0-1046-azure", []int{20}},
		{"an AKS scale-set VM", AKS, NodeName, "aks-gpu-46663711-vmss000000", []int{60}},
		{"TKGS's version stamp", TKGS, Version, "v1.20.8+vmware.1", []int{60}},
		{"a vsphere providerID", TKGS, ProviderID, "vsphere://42088343-c508-332d-383c-04ea5f54509d", []int{20}},
		{"RKE2's version stamp", RKE2, Version, "v1.24.9+rke2r2", []int{70}},
		{"the k3s containerd fork on RKE2", RKE2, Runtime, "containerd://1.7.20-k3s1", []int{40}},
		{"k3s's version stamp", K3s, Version, "v1.30.2+k3s1", []int{70}},
		{"k3s's older version stamp", K3s, Version, "v1.16.2-k3s.1", []int{70}},
		{"an RKE2 stamp is not k3s's", K3s, Version, "v1.24.9+rke2r2", nil},
		{"the k3s containerd fork", K3s, Runtime, "containerd://1.7.20-k3s1", []int{40}},
		{"k0s's version stamp", K0s, Version, "v1.33.2+k0s", []int{70}},
		{"k0s's older version stamp", K0s, Version, "v1.20.2-k0s1", []int{70}},
		{"an empty value never matches", GKE, Kernel, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name+" scores for "+tc.distro, func(t *testing.T) {
			if got := weights(Get(tc.distro), tc.in, tc.value); !slices.Equal(got, tc.want) {
				t.Errorf("%s %s %q: weights %v, want %v", tc.distro, tc.in, tc.value, got, tc.want)
			}
		})
	}
}

// GKE Autopilot is GKE's variant the GPU operator does not support, and the only such variant.
func TestGKEAutopilotIsGKEsUnsupportedVariant(t *testing.T) {
	u := Get(GKE).Unsupported
	if u == nil || u.Name != "GKE Autopilot" || !strings.Contains(u.Warning, "GKE Standard only") {
		t.Fatalf("GKE's unsupported variant = %+v, want GKE Autopilot with its warning", u)
	}
	v := Distribution{Signals: u.Signals}
	if got := weights(v, NodeName, "gk3-autopilot-pool-1-4d0fa82d-ttxh"); !slices.Equal(got, []int{50}) {
		t.Errorf("gk3- node name: weights %v, want [50]", got)
	}
	if got := weights(v, Warning, `pods is forbidden: GKEAutopilot authz: the request was denied`); !slices.Equal(got, []int{50}) {
		t.Errorf("Autopilot's refusal: weights %v, want [50]", got)
	}
	for _, d := range All() {
		if d.Name != GKE && d.Unsupported != nil {
			t.Errorf("%s has an unsupported variant; preflight's autopilot check and Result.Autopilot speak of GKE only", d.Name)
		}
	}
}

// The node-name shapes of GKE, AKS and EC2, on real names and near misses.
func TestNodeNamePatterns(t *testing.T) {
	tests := []struct {
		name string
		is   func(string) bool
		yes  []string
		no   []string
	}{
		{"GKE", isGKENodeName,
			[]string{"gke-my-gpu-cluster-default-pool-4d0fa82d-ttxh", "gke-sample-gpu-cluste-sample-gpu-pool-020622ba-0g7w"},
			[]string{"gke-node-1", "gke-a-b-4d0fa82d-TTXH", "gk3-autopilot-pool-1-4d0fa82d-ttxh", "gke-a-4d0fa82g-ttxh-x", ""}},
		{"AKS", isAKSNodeName,
			[]string{"aks-newpool-20956280-vmss000000", "aks-hb120rs-25770050-vmss00000a", "aks-agentpool-33865844-0"},
			[]string{"aks-pool-1234-vmss000000", "aks-pool-20956280-vmss0000", "aksnpwin000000", "aks-Pool-20956280-0", "aks--20956280-0"}},
		{"EC2", isEC2NodeName,
			[]string{"ip-10-0-114-53.ec2.internal", "ip-192-168-52-231.us-west-2.compute.internal"},
			[]string{"ip-10-0-114.ec2.internal", "ip-10-0-114-53", "host.ec2.internal", "ip-a-0-114-53.ec2.internal"}},
	}
	for _, tc := range tests {
		for _, n := range tc.yes {
			if !tc.is(n) {
				t.Errorf("%s: %q is a %s node name", tc.name, n, tc.name)
			}
		}
		for _, n := range tc.no {
			if tc.is(n) {
				t.Errorf("%s: %q is not a %s node name", tc.name, n, tc.name)
			}
		}
	}
}
