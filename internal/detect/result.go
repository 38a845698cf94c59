package detect

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Result is what Analyze concluded from a Snapshot. It is printed by `gpuctl detect` (Table, or
// JSON/YAML through the json tags) and read by the planner.
type Result struct {
	// Distribution is the best distribution-specific candidate, or else kubeadm (Fallback set
	// when not even kubeadm's own signals were seen).
	Distribution Candidate `json:"distribution"`
	// Candidates are every detector that found anything, best first.
	Candidates []Candidate `json:"candidates"`
	// KubernetesVersion is the API server's gitVersion.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// KubeletVersions are the distinct kubelet versions the nodes report.
	KubeletVersions []string `json:"kubeletVersions,omitempty"`
	// Autopilot is set on GKE Autopilot, which the GPU operator does not support
	// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html).
	Autopilot *Finding `json:"autopilot,omitempty"`
	// Nodes counts the nodes.
	Nodes NodeCounts `json:"nodes"`
	// GPUNodes are the nodes with NVIDIA GPUs, each with the reasons it counts.
	GPUNodes []GPUNode `json:"gpuNodes"`
	// Pools group the nodes by the platform's pool label, or by (role, GPU, instance type, OS
	// image, runtime) where there is none.
	Pools []Pool `json:"pools"`
	// Scheduling is what the taint step needs to know.
	Scheduling Scheduling `json:"scheduling"`
	// Admission is whether the API server adds the GPU toleration to pods that request GPUs, or could
	// with a MutatingAdmissionPolicy.
	Admission Admission `json:"admission"`
	// GPUNodeWorkloads are the workloads whose pods may run on GPU nodes today and do not tolerate the
	// GPU taint.
	GPUNodeWorkloads []GPUNodeWorkload `json:"gpuNodeWorkloads,omitempty"`
	// Existing is what is already installed.
	Existing Existing `json:"existing"`
	// PrometheusOperator says whether the cluster serves the Prometheus Operator's monitoring.coreos.com
	// API group (ServiceMonitor, PrometheusRule; kube-prometheus-stack installs it), from the API
	// discovery detection already does; nil when that discovery was refused, so it is not known.
	PrometheusOperator *Finding `json:"prometheusOperator,omitempty"`
	// ResourceAPI says which versions of Dynamic Resource Allocation's API group (resource.k8s.io)
	// the cluster serves; nil when discovery was refused, so it is not known.
	ResourceAPI *ServedVersions `json:"resourceAPI,omitempty"`
	// Warnings are things a person should know: reads that were refused, unsupported setups,
	// conflicting installs.
	Warnings []string `json:"warnings,omitempty"`
}

// Evidence is one observed fact and where it was seen.
type Evidence struct {
	// Signal is the kind of fact: "api group", "label", "providerID", "kubelet version", …
	Signal string `json:"signal"`
	// Value is what was seen, e.g. "gce://proj/us-central1-a/gke-pool-1-abcd".
	Value string `json:"value"`
	// Source is where: "node gke-pool-1-abcd (3 of 3 nodes)", "API discovery", "NFD", …
	Source string `json:"source"`
	// Weight is how strongly the signal points at a distribution (0–100); unset for GPU reasons.
	Weight int `json:"weight,omitempty"`
}

// Candidate is one distribution detector's verdict.
type Candidate struct {
	// Name is the distribution's name in package distro (distro.All: openshift, gke, eks, aks, tkgs, rke2,
	// k3s, microk8s, k0s, kubeadm).
	Name string `json:"name"`
	// Description is for people: "Google Kubernetes Engine".
	Description string `json:"description"`
	// Version is the distribution's own version where it can be derived (OpenShift from
	// ClusterVersion, GKE/EKS/RKE2/k3s from the version suffix, TKGS from the TKR label), else the
	// server's version.
	Version string `json:"version,omitempty"`
	// Confidence is 0–100: the evidence weights combined as independent signals,
	// 1 − ∏(1 − wᵢ/100).
	Confidence int `json:"confidence"`
	// Fallback is true when kubeadm was chosen only because nothing reached MinConfidence, itself
	// included: a guess that upstream defaults fit.
	Fallback bool `json:"fallback,omitempty"`
	// Evidence is what the detector saw.
	Evidence []Evidence `json:"evidence"`
}

// Finding is a yes/no conclusion with its evidence.
type Finding struct {
	Detected bool       `json:"detected"`
	Evidence []Evidence `json:"evidence"`
}

// NodeCounts counts nodes by role.
type NodeCounts struct {
	Total        int `json:"total"`
	ControlPlane int `json:"controlPlane"`
	Workers      int `json:"workers"`
	GPU          int `json:"gpu"`
	// NFDLabelled counts nodes that carry any feature.node.kubernetes.io/ label: some NFD has run.
	NFDLabelled int `json:"nfdLabelled"`
}

// GPUNode is a node with NVIDIA GPUs.
type GPUNode struct {
	Name string `json:"name"`
	Pool string `json:"pool"`
	// Reasons are why this node counts as a GPU node, strongest first.
	Reasons []Evidence `json:"reasons"`
	// GPUs is the GPU count where the node shows one (capacity, GFD or Karpenter label); 0 if unknown.
	GPUs int `json:"gpus,omitempty"`
	// Product is the GPU model where a label names it.
	Product      string `json:"product,omitempty"`
	InstanceType string `json:"instanceType,omitempty"`
	OSImage      string `json:"osImage,omitempty"`
	// Kernel is status.nodeInfo.kernelVersion (uname -r), e.g. "6.8.0-60-generic".
	Kernel string `json:"kernel,omitempty"`
	// Runtime is status.nodeInfo.containerRuntimeVersion, e.g. "containerd://2.1.4".
	Runtime string `json:"runtime,omitempty"`
	// ControlPlane is true for a control-plane node that also has GPUs.
	ControlPlane bool `json:"controlPlane,omitempty"`
	// Unschedulable is true for a cordoned node.
	Unschedulable bool `json:"unschedulable,omitempty"`
	// Tainted is true when the node already has a taint with key nvidia.com/gpu.
	Tainted bool `json:"tainted"`
	// Taints are the node's taints, as spec.taints lists them: the planner and preflight look for ones
	// the GPU stack's DaemonSets do not tolerate.
	Taints []corev1.Taint `json:"taints,omitempty"`
	// HostDriver says why the node is believed to have a driver installed on the host, if it is.
	HostDriver string `json:"hostDriver,omitempty"`
}

// Pool is a group of alike nodes.
type Pool struct {
	Name string `json:"name"`
	// Label is the "key=value" that defines the pool, empty when it was inferred.
	Label string `json:"label,omitempty"`
	// Nodes are the member node names.
	Nodes        []string `json:"nodes"`
	Count        int      `json:"count"`
	GPUNodes     int      `json:"gpuNodes"`
	ControlPlane bool     `json:"controlPlane,omitempty"`
	InstanceType string   `json:"instanceType,omitempty"`
	// OS is a short OS family (ubuntu, rhcos, cos, amzn, bottlerocket, …) from NFD's
	// os_release label or the osImage; empty if unknown.
	OS              string   `json:"os,omitempty"`
	OSImages        []string `json:"osImages,omitempty"`
	Kernels         []string `json:"kernels,omitempty"`
	Runtimes        []string `json:"runtimes,omitempty"`
	KubeletVersions []string `json:"kubeletVersions,omitempty"`
	// Taints are the distinct taints on the pool's nodes, as key=value:Effect.
	Taints []string `json:"taints,omitempty"`
	// Notes are facts about this pool the planner or a person should act on.
	Notes []string `json:"notes,omitempty"`
}

// Scheduling is what gpuctl needs before tainting GPU nodes: the GPU operator Deployment, the NFD
// master and the NFD gc do not tolerate nvidia.com/gpu (NVIDIA/gpu-operator
// deployments/gpu-operator/templates/operator.yaml@v26.7.0; NVIDIA/gpu-operator
// deployments/gpu-operator/values.yaml@v26.7.0), so if every schedulable worker is a GPU node they need that
// toleration added.
type Scheduling struct {
	ControlPlaneNodes []string `json:"controlPlaneNodes,omitempty"`
	// GPUWorkers are schedulable (not cordoned) worker nodes with GPUs.
	GPUWorkers []string `json:"gpuWorkers,omitempty"`
	// OpenWorkers are schedulable workers without GPUs and without any NoSchedule/NoExecute
	// taint: the places an untolerating pod can still go once GPU nodes are tainted.
	OpenWorkers []string `json:"openWorkers,omitempty"`
	// AllWorkersGPU is true when there are GPU workers and no open worker.
	AllWorkersGPU bool `json:"allWorkersGPU"`
	// OpenNodes are the schedulable nodes without GPUs and without any NoSchedule/NoExecute taint,
	// control-plane nodes included (k3s, RKE2 and MicroK8s servers are not tainted): where a pod that
	// tolerates nothing can go once the GPU nodes are tainted.
	OpenNodes []string `json:"openNodes,omitempty"`
	// AllSchedulableGPU is true when there are GPU nodes and no open node: every node an ordinary pod can
	// be scheduled on is a GPU node (a single-node k3s box whose server has the GPU, kubeadm with GPU
	// workers only). GKE taints GPU nodes only in clusters that also have nodes without GPUs
	// (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus), and gpuctl does the same by default.
	AllSchedulableGPU bool `json:"allSchedulableGPU"`
}

// Existing is what is already installed.
type Existing struct {
	NFD         NFDInstall      `json:"nfd"`
	GPUOperator OperatorInstall `json:"gpuOperator"`
	// ClusterPolicies are all ClusterPolicies; ActiveClusterPolicy names the one the operator
	// honours (the oldest; NVIDIA/gpu-operator controllers/clusterpolicy_controller.go@v26.7.0).
	ClusterPolicies     []ClusterPolicy `json:"clusterPolicies,omitempty"`
	ActiveClusterPolicy string          `json:"activeClusterPolicy,omitempty"`
	// GPUClusters are DRA GPUCluster objects (GPU Operator v26.7.0+).
	GPUClusters []string `json:"gpuClusters,omitempty"`
	// DevicePlugins are NVIDIA device plugin DaemonSets, whoever installed them.
	DevicePlugins []DevicePlugin `json:"devicePlugins,omitempty"`
	// Operands are other GPU operator operand DaemonSets (driver, toolkit, validator, …).
	Operands []Component `json:"operands,omitempty"`
	// GKEDriverInstaller is Google's driver installer DaemonSet
	// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html).
	GKEDriverInstaller *Component `json:"gkeDriverInstaller,omitempty"`
	// DCGMExporters are dcgm-exporter DaemonSets not run by the GPU operator.
	DCGMExporters []Component `json:"dcgmExporters,omitempty"`
	// HostDriverNodes are nodes labelled nvidia.com/gpu.deploy.driver=pre-installed by the GPU
	// operator's driver manager (NVIDIA/gpu-operator controllers/state_manager.go@v26.7.0).
	HostDriverNodes []string `json:"hostDriverNodes,omitempty"`
	// Secrets are the NVIDIA AI Enterprise Secrets that exist (names only), which a re-run reuses.
	Secrets []SecretRef `json:"secrets,omitempty"`
}

// Component is one installed workload.
type Component struct {
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Images    []string `json:"images,omitempty"`
	Desired   int32    `json:"desired"`
	Ready     int32    `json:"ready"`
	// ManagedBy says who installed it: "helm release ns/name", "ClusterPolicy/cluster-policy",
	// "OLM subscription ns/name", "GKE", or "" if unknown.
	ManagedBy string `json:"managedBy,omitempty"`
}

// NFDInstall is what is known about Node Feature Discovery.
type NFDInstall struct {
	// Present is true when NFD workloads run or an NFD Subscription exists.
	Present bool `json:"present"`
	// Workloads are the NFD master, worker, gc and topology-updater workloads.
	Workloads []Component `json:"workloads,omitempty"`
	// Namespaces are the namespaces NFD runs in; more than one means duplicate NFDs (NVIDIA/gpu-operator#87, #1038).
	Namespaces []string `json:"namespaces,omitempty"`
	// Helm is the release that installed it, if any; a gpu-operator release means NFD is the
	// operator chart's subchart and goes away with it.
	Helm *HelmRelease `json:"helm,omitempty"`
	// OLM is Red Hat's NFD Operator subscription, if any.
	OLM *Subscription `json:"olm,omitempty"`
	// LabelledNodes counts nodes with feature.node.kubernetes.io/ labels; non-zero without
	// workloads means an NFD ran before (or runs where we could not see it).
	LabelledNodes int `json:"labelledNodes"`
}

// OperatorInstall is what is known about the GPU operator.
type OperatorInstall struct {
	Present bool `json:"present"`
	// Deployment is the operator Deployment, if found.
	Deployment *Component `json:"deployment,omitempty"`
	// Helm is the gpu-operator Helm release (found by chart name or by the Deployment's
	// meta.helm.sh/release-name annotation), even a failed one with no Deployment.
	Helm *HelmRelease `json:"helm,omitempty"`
	// OLM is the gpu-operator-certified Subscription, if any.
	OLM *Subscription `json:"olm,omitempty"`
	// Namespace is where the operator runs or is released.
	Namespace string `json:"namespace,omitempty"`
}

// DevicePlugin is an NVIDIA device plugin DaemonSet and the nodes it targets.
type DevicePlugin struct {
	Component
	// Provider is "gpu-operator", "gke" or "standalone".
	Provider string `json:"provider"`
	// Nodes are the nodes its node selector, required node affinity and tolerations admit.
	Nodes []string `json:"nodes,omitempty"`
}

// ResourceGroup is Dynamic Resource Allocation's API group.
const ResourceGroup = "resource.k8s.io"

// ServedVersions are the versions of an API group the cluster serves (none: not served).
type ServedVersions struct {
	Versions []string `json:"versions"`
}

// Serves reports whether version is among them.
func (s *ServedVersions) Serves(version string) bool {
	return s != nil && slices.Contains(s.Versions, version)
}
