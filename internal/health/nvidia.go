package health

import "k8s.io/apimachinery/pkg/runtime/schema"

// Facts about NVIDIA's stack that the waits and the diagnosis depend on. Sources are files of
// NVIDIA/gpu-operator at v26.7.0 (named below) and NFD v0.19.0 unless stated otherwise.
const (
	// GPUPresentLabel is set to "true" by the GPU Operator on nodes NFD found an NVIDIA PCI device on
	// (controllers/state_manager.go).
	GPUPresentLabel = "nvidia.com/gpu.present"

	// GPUResource is the extended resource the device plugin advertises (controllers/state_manager.go).
	GPUResource = "nvidia.com/gpu"

	// migResourcePrefix: with the mixed MIG strategy the device plugin advertises nvidia.com/mig-<profile> instead of
	// (or beside) nvidia.com/gpu, and either proves the plugin works (cmd/nvidia-validator/main.go).
	migResourcePrefix = "nvidia.com/mig-"

	// validatorApp is the app label of the nvidia-operator-validator DaemonSet's pods
	// (assets/state-operator-validation/0500_daemonset.yaml).
	validatorApp = "nvidia-operator-validator"

	// deployLabelPrefix starts the per-operand node labels the operand DaemonSets select on
	// (controllers/state_manager.go).
	deployLabelPrefix = "nvidia.com/gpu.deploy."

	// pciLabelPrefix starts NFD's PCI labels (controllers/state_manager.go).
	pciLabelPrefix = "feature.node.kubernetes.io/pci-"
)

// Validator init containers, in the order they run; each waits for the previous component
// (assets/state-operator-validation/0500_daemonset.yaml).
const (
	initDriverValidation  = "driver-validation"
	initToolkitValidation = "toolkit-validation"
	initCUDAValidation    = "cuda-validation"
	initPluginValidation  = "plugin-validation"
)

// ClusterPolicy status values (api/nvidia/v1/clusterpolicy_types.go and internal/conditions/consts.go).
const (
	policyStateReady   = "ready"
	policyStateIgnored = "ignored"

	conditionReady = "Ready"

	reasonReconciled       = "Reconciled"
	reasonNoGPUNodes       = "NoGPUNodes"
	reasonNFDLabelsMissing = "NFDLabelsMissing"
)

// ClusterPolicyResource is the GPU Operator's cluster-scoped ClusterPolicy custom resource
// (api/nvidia/v1/clusterpolicy_types.go).
func ClusterPolicyResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "nvidia.com", Version: "v1", Resource: "clusterpolicies"}
}

// NFDGPULabels returns the NFD labels any one of which marks a node as having an NVIDIA GPU: the PCI vendor 10de
// with the GPU Operator's NFD values (deviceLabelFields [vendor]), or class 0300/0302 plus vendor with upstream
// NFD defaults. The operator accepts all three
// (controllers/state_manager.go). Pass it to Waiter.NodesLabelled.
//
// It returns a new map on every call so callers may modify it.
func NFDGPULabels() map[string]string {
	return map[string]string{
		"feature.node.kubernetes.io/pci-10de.present":      "true",
		"feature.node.kubernetes.io/pci-0300_10de.present": "true",
		"feature.node.kubernetes.io/pci-0302_10de.present": "true",
	}
}

// NVIDIADriverResource is the NVIDIADriver custom resource (NVIDIA/gpu-operator api/nvidia/v1alpha1).
func NVIDIADriverResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "nvidia.com", Version: "v1alpha1", Resource: "nvidiadrivers"}
}
