package detect

import (
	"path"
	"strings"
)

// Workload components, as returned by Classify.
const (
	ComponentNFDMaster       = "nfd-master"
	ComponentNFDWorker       = "nfd-worker"
	ComponentNFDGC           = "nfd-gc"
	ComponentNFDTopology     = "nfd-topology-updater"
	ComponentGPUOperator     = "gpu-operator"
	ComponentOperand         = "gpu-operator-operand"
	ComponentDevicePlugin    = "device-plugin"
	ComponentGKEDevicePlugin = "gke-device-plugin"
	ComponentGKEDriver       = "gke-driver-installer"
	ComponentDCGMExporter    = "dcgm-exporter"
	ComponentGFD             = "gpu-feature-discovery"
	ComponentPlatform        = "platform" // a workload a distribution is known by (distro.Workload)
)

// Classify says which component a DaemonSet or Deployment is, or "" if detection does not care
// about it. Gather keeps only classified workloads; Analyze uses the same function, so a hand-built
// Snapshot is read the same way.
func Classify(w Workload) string {
	// Anything the GPU operator created for a ClusterPolicy or NVIDIADriver is an operand, whatever
	// its image: the device plugin, GFD, the validator (which runs the operator image), … The
	// operator sets itself as controller of each operand DaemonSet (NVIDIA/gpu-operator
	// controllers/state_manager.go@v26.7.0).
	if strings.HasPrefix(w.Owner, "ClusterPolicy/") || strings.HasPrefix(w.Owner, "NVIDIADriver/") {
		return ComponentOperand
	}

	if c := nfdComponent(w); c != "" {
		return c
	}

	// The operator Deployment carries app=gpu-operator and runs nvcr.io/nvidia/gpu-operator
	// (NVIDIA/gpu-operator deployments/gpu-operator/templates/operator.yaml@v26.7.0). The same image also runs the
	// validator DaemonSet, so only a Deployment counts as the operator.
	if w.Kind == "Deployment" && (w.Labels["app"] == "gpu-operator" || w.hasImage(isOperatorImage)) {
		return ComponentGPUOperator
	}

	// GKE's own device plugin and driver installer live in kube-system (
	// https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html).
	if (w.Namespace == "kube-system" && strings.HasPrefix(w.Name, "nvidia-gpu-device-plugin")) ||
		w.hasImage(func(repo string) bool { return strings.HasSuffix(repo, "/nvidia-gpu-device-plugin") }) {
		return ComponentGKEDevicePlugin
	}
	if w.Kind == "DaemonSet" && w.Namespace == "kube-system" && strings.HasPrefix(w.Name, "nvidia-driver-installer") {
		return ComponentGKEDriver
	}

	// nvcr.io/nvidia/k8s-device-plugin runs the device plugin, GFD and the MPS control daemon
	// (deployments/gpu-operator/values.yaml of NVIDIA/gpu-operator at each release tag); tell them apart by command or
	// name.
	if w.hasImage(func(repo string) bool { return strings.HasSuffix(repo, "/k8s-device-plugin") }) {
		switch {
		case w.mentions("gpu-feature-discovery"):
			return ComponentGFD
		case w.mentions("mps-control-daemon"):
			return ""
		default:
			return ComponentDevicePlugin
		}
	}
	if w.hasImage(func(repo string) bool { return strings.HasSuffix(repo, "/dcgm-exporter") }) {
		return ComponentDCGMExporter
	}

	// A workload a distribution is known by (distro.Workload signals: TKGS's guest cloud provider).
	if platformWorkload(w) {
		return ComponentPlatform
	}
	return ""
}

// nfdComponent recognises NFD by its binaries (nfd-master, nfd-worker, nfd-gc,
// nfd-topology-updater; NFD chart v0.19.0) or its image, which covers the upstream chart, the GPU
// operator's subchart and Red Hat's NFD Operator alike.
func nfdComponent(w Workload) string {
	for _, c := range w.Commands {
		for _, f := range strings.Fields(c) {
			switch path.Base(f) {
			case "nfd-master":
				return ComponentNFDMaster
			case "nfd-worker":
				return ComponentNFDWorker
			case "nfd-gc":
				return ComponentNFDGC
			case "nfd-topology-updater":
				return ComponentNFDTopology
			}
		}
	}
	if !w.hasImage(func(repo string) bool { return strings.Contains(repo, "node-feature-discovery") }) {
		return ""
	}
	switch {
	case strings.HasSuffix(w.Name, "-master") || strings.Contains(w.Name, "nfd-master"):
		return ComponentNFDMaster
	case strings.HasSuffix(w.Name, "-worker") || strings.Contains(w.Name, "nfd-worker"):
		return ComponentNFDWorker
	case strings.HasSuffix(w.Name, "-gc"):
		return ComponentNFDGC
	case strings.Contains(w.Name, "topology-updater"):
		return ComponentNFDTopology
	case w.Kind == "DaemonSet":
		return ComponentNFDWorker
	default:
		return ComponentNFDMaster
	}
}

func isOperatorImage(repo string) bool {
	return repo == "nvcr.io/nvidia/gpu-operator" || strings.HasSuffix(repo, "/nvidia/gpu-operator")
}

func (w Workload) hasImage(match func(repo string) bool) bool {
	for _, img := range w.Images {
		if match(imageRepo(img)) {
			return true
		}
	}
	return false
}

func (w Workload) mentions(s string) bool {
	if strings.Contains(w.Name, s) {
		return true
	}
	for _, c := range w.Commands {
		if strings.Contains(c, s) {
			return true
		}
	}
	return false
}

// imageRepo strips the tag and digest from an image reference:
// "nvcr.io/nvidia/gpu-operator:v26.7.0" → "nvcr.io/nvidia/gpu-operator".
func imageRepo(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}
