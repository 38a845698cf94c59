package flavor

import (
	"maps"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// tkgsFlavor is a Tanzu Kubernetes Grid Service (vSphere with Tanzu, now VKS) guest cluster with NVIDIA
// AI Enterprise vGPU worker VMs. Facts from the node listing, namespaces and pods in
// a user's published vSphere with Tanzu + NVAIE walk-through (vSphere 7.0U3, TKr v1.20.8---vmware.1-tkg.2) and replicatedhq/troubleshoot pkg/analyze/distribution.go:
// kubelet "+vmware.1", label run.tanzu.vmware.com/kubernetesDistributionVersion on every node, no
// instance-type label, Antrea as CNI, vmware-system-* namespaces, vsphere:// provider IDs. Guest
// clusters are built by Cluster API with kubeadm, so nodes also carry CAPI's and kubeadm's marks.
func tkgsFlavor() Flavor {
	return Flavor{
		Name:        "tkgs",
		Description: "vSphere with Tanzu (TKGS/VKS) guest cluster with NVIDIA AI Enterprise vGPU workers",
		Nodes:       tkgsNodes,
		CRDs:        tkgsCRDs,
		Objects:     tkgsObjects,
	}
}

// The guest cluster and the vSphere namespace on the Supervisor that owns it.
const (
	tkgsCluster   = "tkgs-gpu"
	tkgsNamespace = "ml-team"
)

// tkgsNodes are the guest cluster's control plane and its GPU and CPU node pools, as Cluster API builds them.
func tkgsNodes(s Scenario) []SimNode {
	s = s.Defaults()
	ubuntu2204 := ubuntu("22.04.5", "5.15.0-143-generic") // VKS guest images: Ubuntu 22.04 (NVIDIA 26.7 platform table)
	kubelet := s.KubeletVersion + "+vmware.1"
	// The walk-through shows v1.20.8_vmware.1-tkg.2: the TKr version with "+" made label-safe.
	distribution := strings.ReplaceAll(kubelet, "+", "_") + "-tkg.1"
	return buildNodes(s, 1, func(r role, i int) nodeSpec {
		n := nodeSpec{
			os:      ubuntu2204,
			runtime: "containerd://1.7.27",
			kubelet: kubelet,
			labels:  map[string]string{"run.tanzu.vmware.com/kubernetesDistributionVersion": distribution},
		}
		ownerKind, owner := "MachineSet", ""
		switch r {
		case controlPlane:
			// VM class best-effort-medium.
			n.name = tkgsCluster + "-control-plane-" + nodeSuffix(tkgsCluster+"/cp", i, 5, kubeSuffixDigits)
			n.machine = machine{cpu: 2, memoryGiB: 8, diskGiB: 60, pods: 110}
			var cpLabels map[string]string
			cpLabels, n.taints = kubeadmControlPlane(s.kubeMinor())
			maps.Copy(n.labels, cpLabels)
			ownerKind, owner = "KubeadmControlPlane", tkgsCluster+"-control-plane"
		case gpuWorker:
			// A VM class with an NVIDIA vGPU PCI device (the walk-through's "gpu01").
			owner = tkgsCluster + "-gpu-pool-" + token(tkgsCluster+"/gpu-pool", 5, kubeSuffixDigits)
			n.name = owner + "-" + nodeSuffix(owner, i, 9, kubeSuffixDigits)
			n.machine = machine{cpu: 8, memoryGiB: 64, diskGiB: 60, pods: 110, gpus: s.GPUsPerNode, gpu: standin.GPUA100vGPU40C}
		case cpuWorker:
			// VM class best-effort-large.
			owner = tkgsCluster + "-cpu-pool-" + token(tkgsCluster+"/cpu-pool", 5, kubeSuffixDigits)
			n.name = owner + "-" + nodeSuffix(owner, i, 9, kubeSuffixDigits)
			n.machine = machine{cpu: 4, memoryGiB: 16, diskGiB: 60, pods: 110}
		}
		// The provider ID is the VM's BIOS UUID, which vSphere starts with 42.
		n.systemUUID = "42" + uuidToken(n.name + "/vm")[2:]
		n.providerID = "vsphere://" + n.systemUUID
		n.annotations = map[string]string{
			"kubeadm.alpha.kubernetes.io/cri-socket": "unix:///var/run/containerd/containerd.sock",
			"cluster.x-k8s.io/cluster-name":          tkgsCluster,
			"cluster.x-k8s.io/cluster-namespace":     tkgsNamespace,
			"cluster.x-k8s.io/machine":               n.name,
			"cluster.x-k8s.io/owner-kind":            ownerKind,
			"cluster.x-k8s.io/owner-name":            owner,
		}
		return n
	})
}

// tkgsCRDs are the API groups a guest cluster serves.
func tkgsCRDs() []apiextensionsv1.CustomResourceDefinition {
	// run.tanzu.vmware.com (TanzuKubernetesCluster, TanzuKubernetesRelease, ClusterBootstrap) is
	// served by the Supervisor, not inside the guest cluster (replicatedhq/troubleshoot pkg/analyze/distribution.go keys on it, but it is certain only on
	// the Supervisor), so it is not here. What the guest does serve: Antrea's CRDs (the default CNI,
	// the walk-through's pods) and, uncertain, kapp-controller's packaging API for TKG's auto-managed packages.
	return newCRDs(
		crdSpec{"crd.antrea.io", "v1beta1", "ClusterNetworkPolicy", "clusternetworkpolicies", true},
		crdSpec{"crd.antrea.io", "v1beta1", "NetworkPolicy", "networkpolicies", false},
		crdSpec{"crd.antrea.io", "v1beta1", "Tier", "tiers", true},
		crdSpec{"crd.antrea.io", "v1beta1", "AntreaAgentInfo", "antreaagentinfos", true},
		crdSpec{"crd.antrea.io", "v1beta1", "AntreaControllerInfo", "antreacontrollerinfos", true},
		crdSpec{"packaging.carvel.dev", "v1alpha1", "PackageInstall", "packageinstalls", false},
		crdSpec{"packaging.carvel.dev", "v1alpha1", "PackageRepository", "packagerepositories", false},
	)
}

// tkgsObjects are the guest cluster's vmware-system namespaces and kubeadm's ConfigMaps.
func tkgsObjects(s Scenario) []unstructured.Unstructured {
	s = s.Defaults()
	var objs []unstructured.Unstructured
	for _, ns := range []string{"vmware-system-auth", "vmware-system-cloud-provider", "vmware-system-csi"} {
		objs = append(objs, namespaceObject(ns, nil))
	}
	return append(objs, kubeadmConfigMaps(kubeadmCluster{
		kubernetesVersion: s.KubeletVersion + "+vmware.1",
		kubeMinor:         s.kubeMinor(),
		endpoint:          "192.168.3.50:6443", // a VIP of the Supervisor's load balancer
		podSubnet:         "192.168.0.0/16",    // TKGS's default pod CIDR
		// Every TKGS node serves the release's images from a local registry (the
		// docker-registry-<node> pods in the walk-through).
		imageRepository: "localhost:5000/vmware.io",
	})...)
}
