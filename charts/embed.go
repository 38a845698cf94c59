package charts

import "embed"

// FS holds every chart, each under its own directory ("node-feature-discovery/Chart.yaml", ...): the
// two of Names and the optional ones of Optional. The all: prefix keeps templates/_helpers.tpl, which
// go:embed would otherwise skip.
//
//go:embed all:node-feature-discovery all:gpu-operator all:olm-operator all:gke-driver-installer all:gpu-monitoring
var FS embed.FS

// Names lists the embedded charts in install order: NFD must label the GPU nodes before the GPU
// Operator can find them (research "What gpuctl should do", install order step 4 before 6).
func Names() []string {
	return []string{"node-feature-discovery", "gpu-operator"}
}

// Optional lists the embedded charts that only some platforms need, so they are not in Names and
// its install order. gke-driver-installer runs Google's NVIDIA driver installer on GKE GPU nodes
// where GKE installs no driver; it must be ready before the GPU Operator, which then runs with
// driver.enabled=false (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html). olm-operator subscribes to an operator through OLM, the
// only way NVIDIA supports on OpenShift (NVIDIA/cloud-native-docs openshift/install-gpu-ocp.rst).
// gpu-monitoring is the Grafana dashboard and Prometheus alerts of `gpuctl install --monitoring`, installed
// after the GPU Operator where the cluster serves the Prometheus Operator's monitoring.coreos.com API.
func Optional() []string {
	return []string{"gke-driver-installer", "olm-operator", "gpu-monitoring"}
}
