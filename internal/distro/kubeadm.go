package distro

// Kubeadm is upstream Kubernetes's name, as kubeadm (and compatible tools) build it.
const Kubeadm = "kubeadm"

// kubeadm: ConfigMap kube-system/kubeadm-config, kubeadm's empty-valued control-plane role label
// (RKE2 and k3s set "true"), and the CRI socket annotation it puts on the nodes it joins
// (replicatedhq/troubleshoot pkg/analyze/distribution.go). It is also detection's fallback: upstream
// defaults (containerd in its standard places) are the right starting point for any cluster gpuctl
// cannot name.
func kubeadm() Distribution {
	return Distribution{
		Name: Kubeadm, Title: "Kubernetes, kubeadm or compatible", Short: "kubeadm", Profile: Kubeadm,
		Signals: []Signal{
			{In: ConfigMap, Name: "kube-system/kubeadm-config", Weight: 80},
			{In: Label, Keys: []string{"node-role.kubernetes.io/control-plane"}, EmptyValue: true, Weight: 20},
			// kind, itself kubeadm, shows the annotation (projectcapsule/capsule-proxy#137). Cluster API clusters
			// (TKGS among them) are kubeadm too.
			{In: Annotation, Prefixes: []string{"kubeadm.alpha.kubernetes.io/cri-socket"}, Weight: 70},
		},
		Fallback: true,
		Containerd: &Containerd{
			Socket: DefaultContainerdSocket, Usual: true,
			Source: "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html",
		},
	}
}
