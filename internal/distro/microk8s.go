package distro

// MicroK8s is Canonical MicroK8s's name.
const MicroK8s = "microk8s"

// microK8s: its node labels (replicatedhq/troubleshoot pkg/analyze/distribution.go).
func microK8s() Distribution {
	return Distribution{
		Name: MicroK8s, Title: "Canonical MicroK8s", Short: "MicroK8s", Profile: MicroK8s,
		Signals: []Signal{
			{In: Label, Keys: []string{"microk8s.io/cluster"}, Value: "true", Weight: 80},
			{In: Label, Keys: []string{"node.kubernetes.io/microk8s-controlplane", "node.kubernetes.io/microk8s-worker"}, Weight: 70},
		},
		// The snap's containerd regenerates containerd.toml from the template on restart.
		Containerd: &Containerd{
			Socket: "/var/snap/microk8s/common/run/containerd.sock", Config: "/var/snap/microk8s/current/args/containerd-template.toml",
			FileSourceSince: 1, Source: "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html",
		},
	}
}
