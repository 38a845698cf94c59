package distro

// K3s is K3s's name.
const K3s = "k3s"

// k3s: RKE2's signals (rke2.go) under its own program name; k3s stamped its builds "-k3s.1" before it
// took "+k3s1" (v1.16.2-k3s.1, k3s-io/k3s#1032).
func k3s() Distribution {
	return Distribution{
		Name: K3s, Title: "K3s", Short: "K3s", Profile: K3s,
		Signals: []Signal{
			{In: Annotation, Prefixes: []string{"k3s.io/", "etcd.k3s.cattle.io/"}, Weight: 70},
			{In: Label, Prefixes: []string{"k3s.io/"}, Weight: 70},
			{In: Version, Match: Match{Contains: []string{"+k3s", "-k3s."}}, Weight: 70, GivesVersion: true},
			{In: Label, Keys: []string{"node.kubernetes.io/instance-type"}, Value: "k3s", Weight: 60},
			{In: Runtime, Match: Match{Prefix: "containerd://", Contains: []string{"-k3s"}}, Weight: 40},
			{In: APIGroup, Name: "helm.cattle.io", Weight: 30},
			{In: APIGroup, Name: "k3s.cattle.io", Weight: 10},
		},
		// K3s runs the same containerd fork as RKE2; pointing the toolkit at its template can drop the
		// flannel CNI config.
		Containerd: &Containerd{
			Socket: "/run/k3s/containerd/containerd.sock", Managed: "/var/lib/rancher/k3s/agent/etc/containerd/",
			CDISince: 2, CDISource: "https://docs.rke2.io/add-ons/gpu_operators",
			Source: "https://docs.rke2.io/add-ons/gpu_operators; NVIDIA/gpu-operator#473",
		},
		// K3s detects the NVIDIA runtime and registers RuntimeClass nvidia itself (k3s-io/docs
		// docs/advanced/advanced.md).
		RuntimeClass: true,
	}
}
