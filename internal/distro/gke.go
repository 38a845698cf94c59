package distro

import "strings"

// GKE is Google Kubernetes Engine's name.
const GKE = "gke"

// gkeAutopilotLabel marks GKE Autopilot nodes (replicatedhq/troubleshoot pkg/analyze/distribution.go).
const gkeAutopilotLabel = "cloud.google.com/gke-autopilot"

// gke: node-pool and OS labels, "-gke." builds, gce:// providerIDs, Container-Optimized OS
// (replicatedhq/troubleshoot pkg/analyze/distribution.go).
func gke() Distribution {
	return Distribution{
		Name: GKE, Title: "Google Kubernetes Engine", Short: "GKE", Profile: GKE,
		Signals: []Signal{
			{In: Label, Keys: []string{"cloud.google.com/gke-nodepool"}, Weight: 70},
			{In: Label, Keys: []string{"cloud.google.com/gke-os-distribution"}, Weight: 40},
			{In: Version, Match: Match{Contains: []string{"-gke."}}, Weight: 70, GivesVersion: true},
			{In: OSImage, Match: Match{Contains: []string{"Container-Optimized OS"}}, Weight: 40},
			{In: Label, Keys: []string{gkeAutopilotLabel}, Weight: 60},
			// Any other cloud.google.com/gke-* label (gke-accelerator, gke-boot-disk, …) is GKE's own.
			{In: Label, Prefixes: []string{"cloud.google.com/gke-"}, Except: []string{"cloud.google.com/gke-nodepool", "cloud.google.com/gke-os-distribution", gkeAutopilotLabel}, Weight: 70},
			{In: NodeName, Match: Match{Is: isGKENodeName}, Weight: 60},
			// Ubuntu's linux-gke kernel flavour ("5.15.0-1048-gke") is built for GKE's Ubuntu node images.
			{In: Kernel, Match: Match{Suffix: "-gke"}, Weight: 50},
			{In: ProviderID, Match: Match{Prefix: "gce://"}, Weight: 30},
			{In: ManagedControlPlane, Weight: 10},
		},
		// Autopilot: its node label (replicatedhq/troubleshoot pkg/analyze/distribution.go), "gk3-" node names
		// (Autopilot's node naming; community convention, weaker), and Autopilot's policy refusals ("GKEAutopilot
		// authz" in Forbidden errors, agones-dev/agones#2249).
		Unsupported: &Variant{
			Name: "GKE Autopilot",
			Signals: []Signal{
				{In: Label, Keys: []string{gkeAutopilotLabel}, Weight: 80},
				{In: NodeName, Match: Match{Prefix: "gk3-"}, Weight: 50},
				{In: Warning, Match: Match{Contains: []string{"GKEAutopilot", "GKE Autopilot"}}, Weight: 50},
			},
			Warning: "GKE Autopilot: the NVIDIA GPU operator supports GKE Standard only (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html); use a Standard cluster or GKE's own GPU support",
		},
		PoolNotes: []PoolNote{{
			Label: "gke-no-default-nvidia-gpu-device-plugin", Value: "true",
			Note:      "GKE's own device plugin is disabled on this pool (gke-no-default-nvidia-gpu-device-plugin=true)",
			Otherwise: "GKE runs its own device plugin here unless the pool is created with --node-labels=gke-no-default-nvidia-gpu-device-plugin=true (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html)",
		}},
		// On containerd 2 (GKE 1.33+) `containerd config dump` made the toolkit drop GKE's CNI plugin.
		Containerd: &Containerd{Socket: DefaultContainerdSocket, FileSourceSince: 2, Source: "NVIDIA/gpu-operator#1577", Usual: true},
		// GKE's VMs cannot reset a GPU to change its MIG mode: MIG manager must reboot the node
		// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html).
		MIGReboot: true,
		// Where GKE installs no driver and the operator's driver container is off (it does not support
		// COS), Google's installer DaemonSet puts the driver on the host (NVIDIA's GKE guide, "Google driver
		// installer" mode).
		DriverInstaller: true,
	}
}

// isGKENodeName matches GKE's VM names, gke-<cluster>-<pool>-<8 hex>-<4 characters>, cluster and pool names
// shortened to fit (gke-my-gpu-cluster-default-pool-4d0fa82d-ttxh, kubernetes/kubernetes#55005;
// gke-dev-pangeo-io-cl-jupyter-gpu-pool-026fa47a-q754, pangeo-data/pangeo-cloud-federation#425).
func isGKENodeName(name string) bool {
	parts := strings.Split(name, "-")
	if len(parts) < 5 || parts[0] != "gke" {
		return false
	}
	group, suffix := parts[len(parts)-2], parts[len(parts)-1]
	return len(group) == 8 && isOf(group, hexDigits) && len(suffix) == 4 && isOf(suffix, lowerAlnum)
}
