package distro

// RKE2 is Rancher RKE2's name.
const RKE2 = "rke2"

// rke2: RKE2 and k3s share the k3s containerd fork (runtime "containerd://…-k3s1", socket
// /run/k3s/containerd/containerd.sock) and the helm.cattle.io and k3s.cattle.io API groups
// (addons.k3s.cattle.io is served on RKE2 too: rancher/rke2#2425). What tells them apart is the
// program name in the node annotations, the version stamp and the embedded cloud provider's
// instance-type label (replicatedhq/troubleshoot pkg/analyze/distribution.go; RKE2 v1.24.9+rke2r2).
func rke2() Distribution {
	return Distribution{
		Name: RKE2, Title: "Rancher RKE2", Short: "RKE2", Profile: RKE2,
		Signals: []Signal{
			{In: Annotation, Prefixes: []string{"rke2.io/", "etcd.rke2.cattle.io/"}, Weight: 70},
			{In: Label, Prefixes: []string{"rke2.io/"}, Weight: 70},
			{In: Version, Match: Match{Contains: []string{"+rke2r"}}, Weight: 70, GivesVersion: true},
			{In: Label, Keys: []string{"node.kubernetes.io/instance-type"}, Value: "rke2", Weight: 60},
			{In: Runtime, Match: Match{Prefix: "containerd://", Contains: []string{"-k3s"}}, Weight: 40},
			{In: APIGroup, Name: "helm.cattle.io", Weight: 30},
			{In: APIGroup, Name: "k3s.cattle.io", Weight: 10},
		},
		// RKE2 writes config.toml itself; the toolkit writing its template breaks RKE2 after a reboot.
		Containerd: &Containerd{
			Socket: "/run/k3s/containerd/containerd.sock", Managed: "/var/lib/rancher/rke2/agent/etc/containerd/",
			CDISince: 2, CDISource: "https://docs.rke2.io/add-ons/gpu_operators",
			Source: "https://docs.rke2.io/add-ons/gpu_operators; NVIDIA/gpu-operator#992",
		},
		// RKE2 detects the NVIDIA runtime and registers RuntimeClass nvidia itself; the operator's toolkit adds
		// the same handler to its containerd (https://docs.rke2.io/add-ons/gpu_operators).
		RuntimeClass: true,
	}
}
