package detect

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
)

// Node fixtures are built from what each platform's kubelet really registers: the labels,
// annotations, providerIDs, kubelet version suffixes, OS images and runtimes in
// replicatedhq/troubleshoot pkg/analyze/distribution.go and node listings from real clusters (OpenShift, TKGS,
// RKE2, GKE).

type nodeOpt func(*corev1.Node)

func node(name string, opts ...nodeOpt) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
			Annotations: map[string]string{},
		},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{}},
	}
	for _, o := range opts {
		o(&n)
	}
	return n
}

func labels(kv ...string) nodeOpt {
	return func(n *corev1.Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func annotations(kv ...string) nodeOpt {
	return func(n *corev1.Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func providerID(id string) nodeOpt { return func(n *corev1.Node) { n.Spec.ProviderID = id } }

// info sets status.nodeInfo: kubelet version, OS image, kernel, container runtime.
func info(kubelet, osImage, kernel, runtime string) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: kubelet, OSImage: osImage, KernelVersion: kernel, ContainerRuntimeVersion: runtime}
	}
}

func gpuCapacity(count int64) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Capacity[gpuResource] = *resource.NewQuantity(count, resource.DecimalSI)
	}
}

func taint(key, value string, effect corev1.TaintEffect) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

// kubeadmControlPlane is how kubeadm marks and taints a control-plane node.
func kubeadmControlPlane() nodeOpt {
	return func(n *corev1.Node) {
		labels("node-role.kubernetes.io/control-plane", "", "node.kubernetes.io/exclude-from-external-load-balancers", "")(n)
		taint("node-role.kubernetes.io/control-plane", "", corev1.TaintEffectNoSchedule)(n)
	}
}

func cordoned() nodeOpt { return func(n *corev1.Node) { n.Spec.Unschedulable = true } }

func serverVersion(git string) *version.Info {
	return &version.Info{GitVersion: git, Major: "1"}
}

func nodes(ns ...corev1.Node) []corev1.Node { return ns }

// --- clusters ---------------------------------------------------------------------------------

// OpenShift 4.18 on AWS: RHCOS, CRI-O, kubelet "+<hash>", node.openshift.io/os_id (replicatedhq/troubleshoot
// pkg/analyze/distribution.go).
func openshiftCluster() *Snapshot {
	common := []nodeOpt{
		labels("node.openshift.io/os_id", "rhcos"),
		info("v1.31.7+1d2a7d4", "Red Hat Enterprise Linux CoreOS 418.94.202503121207-0", "5.14.0-427.55.1.el9_4.x86_64", "cri-o://1.31.6-3.rhaos4.18.gitb45d3e5.el9"),
	}
	master := func(name string) corev1.Node {
		return node(name, append(common,
			labels("node-role.kubernetes.io/master", "", "node-role.kubernetes.io/control-plane", "", "node.kubernetes.io/instance-type", "m6i.xlarge"),
			taint("node-role.kubernetes.io/master", "", corev1.TaintEffectNoSchedule),
			providerID("aws:///us-east-1a/i-0a1b2c3d4e5f60001"))...)
	}
	return &Snapshot{
		Nodes: nodes(
			master("ip-10-0-1-10.ec2.internal"),
			master("ip-10-0-1-11.ec2.internal"),
			master("ip-10-0-1-12.ec2.internal"),
			node("ip-10-0-2-20.ec2.internal", append(common,
				labels("node-role.kubernetes.io/worker", "", "node.kubernetes.io/instance-type", "m6i.2xlarge"),
				providerID("aws:///us-east-1a/i-0a1b2c3d4e5f60020"))...),
			node("ip-10-0-2-21.ec2.internal", append(common,
				labels("node-role.kubernetes.io/worker", "", "node.kubernetes.io/instance-type", "g5.2xlarge"),
				providerID("aws:///us-east-1a/i-0a1b2c3d4e5f60021"))...),
		),
		APIGroups:      []string{"apps", "apps.openshift.io", "config.openshift.io", "image.openshift.io", "monitoring.coreos.com", "operators.coreos.com", "route.openshift.io", "security.openshift.io"},
		ServerVersion:  serverVersion("v1.31.7+1d2a7d4"),
		ClusterVersion: &ClusterVersion{Desired: "4.18.9", Completed: []string{"4.18.9", "4.18.1"}},
	}
}

// GKE Standard with a default pool and a T4 pool, with GKE's node names (gke-<cluster>-<pool>-<hash>-<suffix>) and replicatedhq/troubleshoot
// pkg/analyze/distribution.go.
func gkeCluster() *Snapshot {
	gke := func(name, pool string, extra ...nodeOpt) corev1.Node {
		opts := []nodeOpt{
			labels("cloud.google.com/gke-nodepool", pool, "cloud.google.com/gke-os-distribution", "cos",
				"node.kubernetes.io/instance-type", "n1-standard-4", "topology.kubernetes.io/zone", "us-central1-a"),
			providerID("gce://my-project/us-central1-a/" + name),
			info("v1.33.4-gke.1172000", "Container-Optimized OS from Google", "6.6.87+", "containerd://2.0.4"),
		}
		return node(name, append(opts, extra...)...)
	}
	return &Snapshot{
		Nodes: nodes(
			gke("gke-sample-gpu-cluster-default-pool-94d5dc5d-wlvl", "default-pool"),
			gke("gke-sample-gpu-cluste-sample-gpu-pool-020622ba-0g7w", "sample-gpu-pool",
				labels("cloud.google.com/gke-accelerator", "nvidia-tesla-t4", "cloud.google.com/gke-gpu-driver-version", "default"),
				gpuCapacity(1),
				taint("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)),
		),
		APIGroups:     []string{"apps", "cloud.google.com", "networking.gke.io"},
		ServerVersion: serverVersion("v1.33.4-gke.1172000"),
		Workloads: []Workload{{
			Kind: "DaemonSet", Namespace: "kube-system", Name: "nvidia-gpu-device-plugin-small-cos",
			Labels: map[string]string{"k8s-app": "nvidia-gpu-device-plugin", "addonmanager.kubernetes.io/mode": "Reconcile"},
			Images: []string{"gke.gcr.io/nvidia-gpu-device-plugin@sha256:0123"},
			Affinity: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "cloud.google.com/gke-accelerator", Operator: corev1.NodeSelectorOpExists}},
			}}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Desired:     1, Ready: 1,
		}},
	}
}

// TKGS guest cluster with an A100 vGPU pool, as a published walk-through lists it (vSphere 7.0U3, TKR
// v1.20.8---vmware.1-tkg.2). Cluster API builds it with kubeadm, so kubeadm-config exists.
func tkgsCluster() *Snapshot {
	tkg := func(name string, extra ...nodeOpt) corev1.Node {
		opts := []nodeOpt{
			labels("run.tanzu.vmware.com/kubernetesDistributionVersion", "v1.20.8_vmware.1-tkg.2"),
			providerID("vsphere://4207d7ef-3c0a-1c5b-2f1c-" + name[len(name)-5:]),
			info("v1.20.8+vmware.1", "Ubuntu 20.04.3 LTS", "5.4.0-88-generic", "containerd://1.4.6"),
		}
		return node(name, append(opts, extra...)...)
	}
	return &Snapshot{
		Nodes: nodes(
			tkg("tkg-gpu-cluster01-control-plane-965cz", labels("node-role.kubernetes.io/control-plane", "", "node-role.kubernetes.io/master", "")),
			tkg("tkg-gpu-cluster01-tkg-gpu-cluster01-nodepool-01-6k7cs-6bbck47m8"),
			tkg("tkg-gpu-cluster01-tkg-gpu-cluster01-nodepool-02-czl9w-75fbdmppm"),
		),
		APIGroups:     []string{"apps", "crd.antrea.io"},
		ServerVersion: serverVersion("v1.20.8+vmware.1"),
		KubeadmConfig: true,
		Workloads: []Workload{{
			Kind: "Deployment", Namespace: "vmware-system-cloud-provider", Name: "guest-cluster-cloud-provider",
			Images: []string{"localhost:5000/vmware/guest-cluster-cloud-provider:v0.1"}, Desired: 1, Ready: 1,
		}},
	}
}

// Single-node RKE2 as a published walk-through lists it (dxlab-nb-00, v1.24.9+rke2r2, GeForce MX150), before NFD ran.
func rke2Cluster() *Snapshot {
	return &Snapshot{
		Nodes: nodes(node("dxlab-nb-00",
			labels("beta.kubernetes.io/instance-type", "rke2", "node.kubernetes.io/instance-type", "rke2", "egress.rke2.io/cluster", "true",
				"node-role.kubernetes.io/control-plane", "true", "node-role.kubernetes.io/etcd", "true", "node-role.kubernetes.io/master", "true"),
			annotations("rke2.io/hostname", "dxlab-nb-00", "rke2.io/internal-ip", "192.168.50.195",
				"rke2.io/node-args", `["server","--cni","calico"]`, "etcd.rke2.cattle.io/node-name", "dxlab-nb-00-4a5b6c7d"),
			providerID("rke2://dxlab-nb-00"),
			info("v1.24.9+rke2r2", "Ubuntu 20.04.5 LTS", "5.15.0-46-generic", "containerd://1.6.12-k3s1"),
		)),
		APIGroups:     []string{"apps", "helm.cattle.io", "k3s.cattle.io"},
		ServerVersion: serverVersion("v1.24.9+rke2r2"),
	}
}

// K3s server and agent (replicatedhq/troubleshoot pkg/analyze/distribution.go; k3s-io/docs docs/advanced/advanced.md).
func k3sCluster() *Snapshot {
	k3s := func(name string, extra ...nodeOpt) corev1.Node {
		opts := []nodeOpt{
			labels("node.kubernetes.io/instance-type", "k3s", "beta.kubernetes.io/instance-type", "k3s"),
			annotations("k3s.io/hostname", name, "k3s.io/internal-ip", "10.0.0.5", "k3s.io/node-args", `["agent"]`),
			providerID("k3s://" + name),
			info("v1.31.5+k3s1", "Ubuntu 24.04.1 LTS", "6.8.0-51-generic", "containerd://1.7.23-k3s2"),
		}
		return node(name, append(opts, extra...)...)
	}
	return &Snapshot{
		Nodes: nodes(
			k3s("k3s-server", labels("node-role.kubernetes.io/control-plane", "true", "node-role.kubernetes.io/master", "true")),
			k3s("k3s-gpu-agent", labels("feature.node.kubernetes.io/pci-0302_10de.present", "true")),
		),
		APIGroups:     []string{"apps", "helm.cattle.io", "k3s.cattle.io"},
		ServerVersion: serverVersion("v1.31.5+k3s1"),
	}
}

// EKS with managed node groups on Amazon Linux 2023 (replicatedhq/troubleshoot pkg/analyze/distribution.go;
// https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/amazon-eks.html).
func eksCluster() *Snapshot {
	eks := func(name, group, instance string, extra ...nodeOpt) corev1.Node {
		opts := []nodeOpt{
			labels("eks.amazonaws.com/nodegroup", group, "eks.amazonaws.com/capacityType", "ON_DEMAND",
				"eks.amazonaws.com/nodegroup-image", "ami-0123456789abcdef0", "node.kubernetes.io/instance-type", instance),
			providerID("aws:///us-west-2a/i-0" + name[len(name)-6:]),
			info("v1.33.4-eks-a737599", "Amazon Linux 2023.8.20250818", "6.1.147-172.266.amzn2023.x86_64", "containerd://1.7.27"),
		}
		return node(name, append(opts, extra...)...)
	}
	return &Snapshot{
		Nodes: nodes(
			eks("ip-192-168-10-11.us-west-2.compute.internal", "system", "m5.large"),
			eks("ip-192-168-20-21.us-west-2.compute.internal", "gpu", "g5.xlarge"),
			eks("ip-192-168-20-22.us-west-2.compute.internal", "gpu", "g5.xlarge"),
		),
		APIGroups:     []string{"apps", "crd.k8s.amazonaws.com", "vpcresources.k8s.aws"},
		ServerVersion: serverVersion("v1.33.4-eks-3025e55"),
	}
}

// EKS with Karpenter-provisioned Bottlerocket NVIDIA nodes, and no server version (discovery
// refused): only the nodes say EKS.
func eksBottlerocketCluster() *Snapshot {
	return &Snapshot{
		Nodes: nodes(node("ip-10-1-2-3.us-east-2.compute.internal",
			labels("karpenter.sh/nodepool", "gpu", "karpenter.k8s.aws/instance-family", "g6",
				"karpenter.k8s.aws/instance-gpu-manufacturer", "nvidia", "karpenter.k8s.aws/instance-gpu-count", "1",
				"karpenter.k8s.aws/instance-gpu-name", "l4", "node.kubernetes.io/instance-type", "g6.xlarge"),
			providerID("aws:///us-east-2b/i-0fedcba9876543210"),
			info("v1.33.1-eks-b9364f6", "Bottlerocket OS 1.44.0 (aws-k8s-1.33-nvidia)", "6.1.141", "containerd://2.0.5+bottlerocket"),
		)),
	}
}

// AKS with a system pool and an NC-series GPU pool (replicatedhq/troubleshoot pkg/analyze/distribution.go;
// https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/microsoft-aks.html).
func aksCluster() *Snapshot {
	aks := func(name, pool, size string, extra ...nodeOpt) corev1.Node {
		opts := []nodeOpt{
			labels("kubernetes.azure.com/cluster", "MC_rg-gpu_aks-gpu_eastus", "kubernetes.azure.com/agentpool", pool, "agentpool", pool,
				"kubernetes.azure.com/role", "agent", "kubernetes.azure.com/os-sku", "Ubuntu", "node.kubernetes.io/instance-type", size),
			providerID("azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/mc_rg-gpu_aks-gpu_eastus/providers/Microsoft.Compute/virtualMachineScaleSets/aks-" + pool + "-12345678-vmss/virtualMachines/0"),
			info("v1.33.2", "Ubuntu 22.04.5 LTS", "5.15.0-1092-azure", "containerd://1.7.27-1"),
		}
		return node(name, append(opts, extra...)...)
	}
	return &Snapshot{
		Nodes: nodes(
			aks("aks-system-12345678-vmss000000", "system", "Standard_D4s_v5"),
			aks("aks-gpupool-12345678-vmss000000", "gpupool", "Standard_NC6s_v3", labels("kubernetes.azure.com/accelerator", "nvidia")),
		),
		APIGroups:     []string{"apps", "metrics.k8s.io"},
		ServerVersion: serverVersion("v1.33.2"),
	}
}

func microk8sCluster() *Snapshot {
	return &Snapshot{
		Nodes: nodes(node("mk8s-1",
			labels("microk8s.io/cluster", "true", "node.kubernetes.io/microk8s-controlplane", "microk8s-controlplane"),
			info("v1.33.3", "Ubuntu 24.04.2 LTS", "6.8.0-60-generic", "containerd://1.7.27"),
		)),
		ServerVersion: serverVersion("v1.33.3"),
	}
}

func k0sCluster() *Snapshot {
	return &Snapshot{
		Nodes: nodes(node("k0s-worker-1",
			labels("node.k0sproject.io/role", "worker"),
			info("v1.33.3+k0s", "Ubuntu 24.04.2 LTS", "6.8.0-60-generic", "containerd://1.7.27"),
		)),
		ServerVersion: serverVersion("v1.33.3+k0s"),
	}
}

// A kubeadm cluster on bare metal: one control plane, one GPU worker, one CPU worker, nothing
// NVIDIA installed, so nothing yet shows which worker has the GPU.
func kubeadmCluster() *Snapshot {
	ubuntu := info("v1.33.4", "Ubuntu 24.04.3 LTS", "6.8.0-79-generic", "containerd://2.1.4")
	return &Snapshot{
		Nodes: nodes(
			node("cp-1", kubeadmControlPlane(), ubuntu),
			node("gpu-1", ubuntu),
			node("cpu-1", ubuntu),
		),
		APIGroups:     []string{"apps", "batch"},
		ServerVersion: serverVersion("v1.33.4"),
		KubeadmConfig: true,
	}
}
