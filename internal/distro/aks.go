package distro

import "strings"

// AKS is Azure Kubernetes Service's name.
const AKS = "aks"

// aks: kubernetes.azure.com/* labels and azure:/// providerIDs (replicatedhq/troubleshoot
// pkg/analyze/distribution.go). Its profile turns the toolkit off: AKS's GPU node images bring it.
func aks() Distribution {
	return Distribution{
		Name: AKS, Title: "Azure Kubernetes Service", Short: "AKS", Profile: AKS,
		Signals: []Signal{
			{In: Label, Keys: []string{"kubernetes.azure.com/cluster"}, Weight: 70},
			{In: Label, Keys: []string{"kubernetes.azure.com/agentpool"}, Weight: 50},
			// AKS's other labels (kubernetes.azure.com/role, node-image-version, mode, …; Azure/AKS#2766).
			{In: Label, Prefixes: []string{"kubernetes.azure.com/"}, Except: []string{"kubernetes.azure.com/cluster", "kubernetes.azure.com/agentpool"}, Weight: 60},
			// AKS names its VMs aks-<pool>-<8 digits>-vmss<6 base-36 digits> (scale sets) or -<n> (availability sets).
			{In: NodeName, Match: Match{Is: isAKSNodeName}, Weight: 60},
			// The node resource group AKS creates is MC_<group>_<cluster>_<region>; a providerID in one is an AKS VM.
			{In: ProviderID, Match: Match{Prefix: "azure://", Is: inAKSNodeResourceGroup}, Weight: 70},
			{In: ProviderID, Match: Match{Prefix: "azure://", Is: notInAKSNodeResourceGroup}, Weight: 30},
			// AKS builds its own containerd, "containerd://1.4.4+azure" (Azure/azure-workload-identity#46). The retired
			// aks-engine shipped Microsoft's builds too, so this is the weakest of AKS's unique signals. Ubuntu's -azure
			// kernel ("5.4.0-1046-azure", same source) runs on any Ubuntu VM in Azure.
			{In: Runtime, Match: Match{Contains: []string{"+azure"}}, Weight: 60},
			{In: Kernel, Match: Match{Suffix: "-azure"}, Weight: 20},
			{In: ManagedControlPlane, Weight: 10},
		},
		PoolNotes: []PoolNote{{
			Label: "kubernetes.azure.com/dcgm-exporter", Value: "enabled",
			Note:      "AKS managed GPU pool: AKS already runs the driver, device plugin and DCGM exporter; do not add the GPU operator (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/microsoft-aks.html)",
			Otherwise: "AKS installs the driver on GPU pools unless the pool was created with --gpu-driver none, and the API does not show which (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/microsoft-aks.html)",
		}},
	}
}

// isAKSNodeName matches AKS's VM names: aks-<pool>-<8 digits>-vmss<6 base-36 characters> for scale sets
// (aks-newpool-20956280-vmss000000, virtual-kubelet/virtual-kubelet#1250) and aks-<pool>-<8 digits>-<n> for the
// older availability sets (aks-agentpool-33865844-0, kubernetes/autoscaler#1270).
func isAKSNodeName(name string) bool {
	parts := strings.Split(name, "-")
	if len(parts) != 4 || parts[0] != "aks" || parts[1] == "" || !isOf(parts[1], lowerAlnum) {
		return false
	}
	if len(parts[2]) != 8 || !isOf(parts[2], digits) {
		return false
	}
	last := parts[3]
	if rest, ok := strings.CutPrefix(last, "vmss"); ok {
		return len(rest) == 6 && isOf(rest, lowerAlnum)
	}
	return last != "" && isOf(last, digits)
}

// inAKSNodeResourceGroup: an Azure providerID in a resource group named MC_…, as AKS names the node
// resource groups it creates (any case).
func inAKSNodeResourceGroup(providerID string) bool {
	return strings.Contains(strings.ToLower(providerID), "/resourcegroups/mc_")
}

// notInAKSNodeResourceGroup: an Azure providerID elsewhere (any Azure VM).
func notInAKSNodeResourceGroup(providerID string) bool {
	return !inAKSNodeResourceGroup(providerID)
}
