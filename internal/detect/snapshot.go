package detect

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/version"
)

// Snapshot is everything detection reads from a cluster, gathered once by Gather. Analyze works on
// a Snapshot alone, so tests can build one by hand.
type Snapshot struct {
	// Nodes is every node in the cluster.
	Nodes []corev1.Node `json:"nodes"`
	// APIGroups are the API group names the server serves ("" for the core group is left out).
	APIGroups []string `json:"apiGroups,omitempty"`
	// ResourceAPIVersions are the versions the server serves of DRA's API group resource.k8s.io.
	ResourceAPIVersions []string `json:"resourceAPIVersions,omitempty"`
	// ServerVersion is what the API server reports; nil if discovery could not read it.
	ServerVersion *version.Info `json:"serverVersion,omitempty"`
	// KubeadmConfig is true when ConfigMap kube-system/kubeadm-config exists.
	KubeadmConfig bool `json:"kubeadmConfig"`
	// Workloads are the DaemonSets and Deployments, cluster-wide, that detection cares about (see
	// Classify): NFD, the GPU operator and its operands, device plugins, GKE's driver installer,
	// dcgm-exporter, and platform markers. Everything else is dropped at gather time.
	Workloads []Workload `json:"workloads,omitempty"`
	// HelmReleases is the newest revision of every Helm release found in Helm's storage.
	HelmReleases []HelmRelease `json:"helmReleases,omitempty"`
	// ClusterPolicies are the nvidia.com/v1 ClusterPolicy objects; empty when the type is not served.
	ClusterPolicies []ClusterPolicy `json:"clusterPolicies,omitempty"`
	// GPUClusters names the nvidia.com/v1alpha1 GPUCluster objects (the DRA stack, GPU Operator
	// v26.7.0+); the chart refuses to deploy a ClusterPolicy next to one (NVIDIA/gpu-operator
	// deployments/gpu-operator@v26.7.0).
	GPUClusters []string `json:"gpuClusters,omitempty"`
	// Subscriptions are the OLM Subscriptions for NVIDIA's operator and NFD, read only when
	// operators.coreos.com is served.
	Subscriptions []Subscription `json:"subscriptions,omitempty"`
	// ClusterVersion is OpenShift's ClusterVersion "version", read only when config.openshift.io is
	// served.
	ClusterVersion *ClusterVersion `json:"clusterVersion,omitempty"`
	// Secrets are the NVIDIA AI Enterprise Secrets (LicensingSecret, NGCPullSecret) in any namespace,
	// by name only: their data is never read.
	Secrets []SecretRef `json:"secrets,omitempty"`
	// GPUToleration is whether a server-side dry-run create of a pod that requests nvidia.com/gpu came
	// back with a toleration of the GPU taint (the ExtendedResourceToleration admission plugin, or anything
	// that does the same); nil when the dry run was refused or failed.
	GPUToleration *bool `json:"gpuToleration,omitempty"`
	// MutatingAdmissionPolicy is whether admissionregistration.k8s.io/v1 serves mutatingadmissionpolicies;
	// nil when discovery could not tell.
	MutatingAdmissionPolicy *bool `json:"mutatingAdmissionPolicy,omitempty"`
	// PodTemplates are the pod templates of every Deployment, StatefulSet and DaemonSet, as much of them as
	// the GPU taint needs (PodTemplate).
	PodTemplates []PodTemplate `json:"podTemplates,omitempty"`
	// PendingGPUPods are the unscheduled Pending pods that request nvidia.com/gpu, named by their workload.
	PendingGPUPods []PodTemplate `json:"pendingGPUPods,omitempty"`
	// Warnings say which optional reads were refused (Forbidden) or could not be decoded, so the
	// Result can say what it could not see.
	Warnings []string `json:"warnings,omitempty"`
}

// Workload is the part of a DaemonSet or Deployment that detection uses.
type Workload struct {
	Kind      string `json:"kind"` // DaemonSet or Deployment
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Labels are the object's labels.
	Labels map[string]string `json:"labels,omitempty"`
	// HelmRelease and HelmNamespace come from the meta.helm.sh/release-name and
	// meta.helm.sh/release-namespace annotations Helm puts on every object it installs.
	HelmRelease   string `json:"helmRelease,omitempty"`
	HelmNamespace string `json:"helmNamespace,omitempty"`
	// Owner is "Kind/name" of the controlling owner reference, e.g. "ClusterPolicy/cluster-policy"
	// for the GPU operator's operands.
	Owner string `json:"owner,omitempty"`
	// Images are the images of all containers and init containers (GKE's driver installer does its
	// work in an init container).
	Images []string `json:"images,omitempty"`
	// Commands are each container's command and args joined by spaces.
	Commands []string `json:"commands,omitempty"`
	// NodeSelector, Affinity (the required node affinity only) and Tolerations decide which nodes a
	// DaemonSet targets.
	NodeSelector map[string]string    `json:"nodeSelector,omitempty"`
	Affinity     *corev1.NodeSelector `json:"affinity,omitempty"`
	Tolerations  []corev1.Toleration  `json:"tolerations,omitempty"`
	// Desired and Ready are desiredNumberScheduled/numberReady for a DaemonSet and
	// replicas/readyReplicas for a Deployment.
	Desired int32 `json:"desired"`
	Ready   int32 `json:"ready"`
}

// HelmRelease is one Helm release as Helm's storage records it (newest revision only).
type HelmRelease struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Revision  int    `json:"revision"`
	// Status is Helm's status label: deployed, failed, pending-install, pending-upgrade, …
	Status string `json:"status"`
	// Chart, ChartVersion and AppVersion come from the release payload; empty if it could not be
	// decoded.
	Chart        string `json:"chart,omitempty"`
	ChartVersion string `json:"chartVersion,omitempty"`
	AppVersion   string `json:"appVersion,omitempty"`
	// Storage is "Secret" (Helm's default driver) or "ConfigMap".
	Storage string `json:"storage"`
	// Gpuctl says gpuctl wrote the release: its newest revision carries the release label
	// ManagedReleaseLabel=true, which every revision gpuctl writes has and Helm's own upgrade and
	// rollback keep. A release of gpuctl's name without it is someone else's.
	Gpuctl bool `json:"gpuctl,omitempty"`
}

// ManagedReleaseLabel is the Helm release label (`helm install --labels`, kept on Helm's storage
// Secret) that marks the releases gpuctl wrote; internal/release writes it.
const ManagedReleaseLabel = "gpuctl.io/managed"

// ClusterPolicy is the part of an nvidia.com/v1 ClusterPolicy that detection reports.
type ClusterPolicy struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	// State is status.state: ready, notReady, ignored or disabled (NVIDIA/gpu-operator
	// controllers/clusterpolicy_controller.go@v26.7.0).
	State string `json:"state,omitempty"`
	// Namespace is status.namespace, the operator's namespace.
	Namespace string `json:"namespace,omitempty"`
	// ReadyReason and ReadyMessage come from the Ready condition; "ready" with reason
	// NoGPUNodes or NFDLabelsMissing does not mean GPUs work (NVIDIA/gpu-operator
	// controllers/clusterpolicy_controller.go@v26.7.0).
	ReadyReason  string `json:"readyReason,omitempty"`
	ReadyMessage string `json:"readyMessage,omitempty"`
}

// Subscription is the part of an OLM Subscription (operators.coreos.com/v1alpha1) detection reports.
type Subscription struct {
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	Package      string `json:"package"`
	Channel      string `json:"channel,omitempty"`
	Source       string `json:"source,omitempty"`
	InstalledCSV string `json:"installedCSV,omitempty"`
	CurrentCSV   string `json:"currentCSV,omitempty"`
	State        string `json:"state,omitempty"`
	// HelmRelease and HelmNamespace name the Helm release that applied the Subscription (its
	// meta.helm.sh/release-name and -namespace annotations), if one did.
	HelmRelease   string `json:"helmRelease,omitempty"`
	HelmNamespace string `json:"helmNamespace,omitempty"`
	// Gpuctl says gpuctl made it: the Helm release that applied it carries gpuctl's release label
	// (gpuctl subscribes through its olm-operator chart). One of the same name and package that
	// someone created with oc or the console is theirs.
	Gpuctl bool `json:"gpuctl,omitempty"`
}

// ClusterVersion is the part of OpenShift's ClusterVersion "version" detection reads.
type ClusterVersion struct {
	// Desired is status.desired.version.
	Desired string `json:"desired,omitempty"`
	// Completed lists status.history[].version entries whose state is Completed, newest first;
	// the GPU operator takes the OpenShift version from these (getOpenshiftVersion in NVIDIA/gpu-operator
	// controllers/clusterinfo/clusterinfo.go).
	Completed []string `json:"completed,omitempty"`
}
