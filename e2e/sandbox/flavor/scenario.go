package flavor

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// Scenario says what cluster to simulate: which distribution, how many nodes of each kind, and what
// state the GPU stack is already in. The zero value (after Defaults) is a kubeadm cluster with two
// GPU nodes and one CPU node and nothing NVIDIA installed.
type Scenario struct {
	// Distro is one of Distros(): openshift, gke, tkgs, rke2, k3s, eks, aks, microk8s, kubeadm.
	Distro string
	// GPUNodes and CPUNodes are the worker nodes with and without NVIDIA GPUs.
	GPUNodes, CPUNodes int
	// BrokenGPUNodes is how many of the GPU nodes (the last ones) have a GPU that fails every workload:
	// a GPU pod that runs to completion ends with exit code 1 there (see controlplane/gpuworkload.go).
	BrokenGPUNodes int
	// GPUControlPlane: the control-plane node has the GPU and takes workloads: a single-node k3s or RKE2
	// box whose server is the GPU node (k3s and RKE2 flavours). GPUNodes and CPUNodes then count workers
	// only, and 0 and 0 is that single node.
	GPUControlPlane bool
	// ExtraGPUNodes are GPU workers of a second pool with ExtraGPUProduct GPUs (default standin.GPUL4,
	// one of the standin.GPU… products), after the GPUNodes workers: a cluster with two GPU models,
	// e.g. MIG-capable H100s and L4s without MIG. The kubeadm flavour has them, and the gke flavour (a
	// Standard cluster's second GPU pool, l4-pool, always L4s).
	ExtraGPUNodes   int
	ExtraGPUProduct string
	// GPUsPerNode is how many GPUs each GPU node has (default 1).
	GPUsPerNode int
	// NFDLabels: the GPU nodes already carry Node Feature Discovery labels (someone else's NFD ran).
	NFDLabels bool
	// PreinstalledDriver: a host driver is installed on the GPU nodes, which the GPU operator's driver
	// manager marks with nvidia.com/gpu.deploy.driver=pre-installed.
	PreinstalledDriver bool
	// GKEDevicePlugin: GKE's own NVIDIA device plugin DaemonSet runs on the GPU nodes (gke only).
	GKEDevicePlugin bool
	// GKEAutopilot: the cluster is a GKE Autopilot cluster (gke only).
	GKEAutopilot bool
	// KubeletVersion is the Kubernetes version the nodes report, without the distribution's suffix
	// (e.g. "v1.33.4"); the flavour adds its suffix ("-gke.1172000", "+rke2r1", …). Default: the
	// control plane's version.
	KubeletVersion string
	// GPUNodeOS gives GPU workers another operating system than the flavour's: GPU worker i runs
	// GPUNodeOS[i], the workers past the list keep the flavour's. The kernel and OS image are what
	// NVIDIA's precompiled driver images are tagged by (driverimage.PrecompiledTag).
	GPUNodeOS []NodeOS

	// operatorVersion is Options.OperatorVersion, set by the sandbox (WithOperatorVersion): the OpenShift flavour's catalog offers
	// it as the head of the GPU operator's default channel (default: gpuctl's default release).
	operatorVersion string
}

// NodeOS is a node's operating system as status.nodeInfo and /etc/os-release show it.
type NodeOS struct {
	// Image is nodeInfo.osImage ("Ubuntu 24.04.2 LTS"); Kernel is nodeInfo.kernelVersion, uname -r
	// ("6.8.0-60-generic").
	Image, Kernel string
	// ID and VersionID are os-release's ("ubuntu", "24.04"), which NFD's labels and the operator's
	// image tags carry.
	ID, VersionID string
}

// Ubuntu is an Ubuntu LTS release ("24.04.2") running the given kernel.
func Ubuntu(release, kernel string) NodeOS {
	o := ubuntu(release, kernel)
	return NodeOS{Image: o.image, Kernel: o.kernel, ID: o.id, VersionID: o.versionID}
}

// SimNode is one simulated node: the Node object as the platform's kubelet would register it, and the
// hardware behind it.
type SimNode struct {
	Node     corev1.Node
	Hardware standin.Hardware
}

// Flavor is what one distribution looks like through the Kubernetes API.
type Flavor struct {
	// Name is the distribution's short name (Scenario.Distro).
	Name string
	// Description is one line for people ("Google Kubernetes Engine", …).
	Description string
	// Nodes returns the nodes of the scenario: control-plane nodes where the platform shows them,
	// then GPU and CPU workers, each with the labels, annotations, providerID, taints, capacity and
	// status.nodeInfo the platform really reports. Capacity never includes nvidia.com/gpu: only a
	// running device plugin advertises it (the device-plugin stand-in).
	Nodes func(s Scenario) []SimNode
	// CRDs stand for the API groups the platform serves beyond Kubernetes' own.
	CRDs func() []apiextensionsv1.CustomResourceDefinition
	// Objects are the platform's own objects, created once the CRDs are established and the nodes
	// exist. A "status" field is written through the status subresource after create.
	Objects func(s Scenario) []unstructured.Unstructured
	// AdmissionPlugins are the admission plugins the platform's API server enables beyond upstream
	// Kubernetes' defaults (--enable-admission-plugins). ExtendedResourceToleration, which adds the GPU
	// toleration to pods that request nvidia.com/gpu, is on where the platform documents it (GKE, EKS,
	// AKS) and off elsewhere, as upstream leaves it.
	AdmissionPlugins []string
	// LimitCriticalPods: the API server admits system-node-critical and system-cluster-critical pods
	// only in namespaces with a ResourceQuota for them (GKE; https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html).
	LimitCriticalPods bool
}

// WithOperatorVersion returns s with the GPU operator release that the OpenShift flavour's catalog
// offers as the head of the operator's default channel (the sandbox's Options.OperatorVersion).
func (s Scenario) WithOperatorVersion(version string) Scenario {
	s.operatorVersion = version
	return s
}
