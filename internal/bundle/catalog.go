package bundle

import (
	"fmt"
	"strings"
)

// Registries of NVIDIA's images (deployments/gpu-operator/values.yaml of NVIDIA/gpu-operator at each
// release tag).
const (
	nvcr            = "nvcr.io/nvidia"
	nvcrCloudNative = "nvcr.io/nvidia/cloud-native"
	nvcrK8s         = "nvcr.io/nvidia/k8s"
	nfdRegistry     = "registry.k8s.io/nfd"
)

// catalog returns the releases gpuctl can install, newest first. It builds them anew on every call,
// so a caller that changes a Bundle's map or slices cannot change the catalog.
//
// Images are from deployments/gpu-operator/values.yaml of NVIDIA/gpu-operator at each release tag; tested ranges are
// from https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/platform-support.html (NVIDIA's
// platform-support.rst at each release). Where a value comes from elsewhere, its comment says so.
func catalog() []Bundle {
	return []Bundle{release2670(), release2633(), release25101()}
}

// release2670 is GPU Operator v26.7.0.
func release2670() Bundle {
	return Bundle{
		Version: "v26.7.0",
		Default: true,
		Images: map[string]Image{
			// From v25.10.0 the validator and the node status exporter are the operator image
			// (NVIDIA/gpu-operator#1968).
			"operator":                {nvcr, "gpu-operator", "v26.7.0"},
			"validator":               {nvcr, "gpu-operator", "v26.7.0"},
			"nodeStatusExporter":      {nvcr, "gpu-operator", "v26.7.0"},
			"driver":                  {nvcr, "driver", "595.91.07"},
			"driverManager":           {nvcrCloudNative, "k8s-driver-manager", "v0.12.0"},
			"toolkit":                 {nvcrK8s, "container-toolkit", "v1.20.0"},
			"devicePlugin":            {nvcr, "k8s-device-plugin", "v0.20.0"},
			"gfd":                     {nvcr, "k8s-device-plugin", "v0.20.0"},
			"dcgmExporter":            {nvcrK8s, "dcgm-exporter", "4.6.0-4.8.3-distroless"},
			"dcgm":                    {nvcrCloudNative, "dcgm", "4.6.0-1-ubuntu24.04"},
			"migManager":              {nvcrCloudNative, "k8s-mig-manager", "v0.15.0"},
			"gds":                     {nvcrCloudNative, "nvidia-fs", "2.29.4"},
			"gdrcopy":                 {nvcrCloudNative, "gdrdrv", "v2.6"},
			"vgpuDeviceManager":       {nvcrCloudNative, "vgpu-device-manager", "v0.5.0"},
			"sandboxDevicePlugin":     {nvcr, "kubevirt-gpu-device-plugin", "v1.6.0"},
			"kataSandboxDevicePlugin": {nvcrCloudNative, "nvidia-sandbox-device-plugin", "v0.0.5"},
			"ccManager":               {nvcrCloudNative, "k8s-cc-manager", "v0.4.3"},
			// NVIDIA's DRA driver, which the GPUCluster deploys (new in v26.7.0).
			"draDriver": {nvcr, "dra-driver-nvidia-gpu", "v0.5.0"},
			// Since v26.3 the VFIO manager is the driver manager image.
			"vfioManager": {nvcrCloudNative, "k8s-driver-manager", "v0.12.0"},
		},
		NFD: Image{nfdRegistry, "node-feature-discovery", "v0.19.0"},
		// GPU Operator v26.7.0: Kubernetes 1.33-1.36 (1.32 too with Ubuntu 24.04), OpenShift
		// 4.18-4.22, containerd 1.8-2.3 and CRI-O
		// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/platform-support.html).
		Kubernetes:        "1.33 - 1.36",
		KubernetesMinimum: "1.32",
		OpenShift:         "4.18 - 4.22",
		Containerd:        "1.8 - 2.3",
		belowRange:        "NVIDIA validated it only on Ubuntu 24.04 nodes",
		Notes: []string{
			"Kubernetes 1.32 is validated only on Ubuntu 24.04 nodes; 1.33 to 1.36 on every supported OS.",
			"Validated drivers: 610.57.04, 595.91.07 (default and recommended), 580.173.02, 535.309.01.",
			"Driver images for RHEL and Rocky are tagged with the OS major version only (rhel9, rocky10).",
			"The NRI plugin (cdi.nriPluginEnabled) needs containerd 2.1 or newer.",
		},
	}
}

// release2633 is GPU Operator v26.3.3.
func release2633() Bundle {
	return Bundle{
		Version: "v26.3.3",
		Images: map[string]Image{
			"operator":            {nvcr, "gpu-operator", "v26.3.3"},
			"validator":           {nvcr, "gpu-operator", "v26.3.3"},
			"nodeStatusExporter":  {nvcr, "gpu-operator", "v26.3.3"},
			"driver":              {nvcr, "driver", "580.126.20"},
			"driverManager":       {nvcrCloudNative, "k8s-driver-manager", "v0.11.0"},
			"toolkit":             {nvcrK8s, "container-toolkit", "v1.19.1"},
			"devicePlugin":        {nvcr, "k8s-device-plugin", "v0.19.3"},
			"gfd":                 {nvcr, "k8s-device-plugin", "v0.19.3"},
			"dcgmExporter":        {nvcrK8s, "dcgm-exporter", "4.5.3-4.8.2-distroless"},
			"dcgm":                {nvcrCloudNative, "dcgm", "4.5.2-1-ubuntu22.04"},
			"migManager":          {nvcrCloudNative, "k8s-mig-manager", "v0.14.2"},
			"gds":                 {nvcrCloudNative, "nvidia-fs", "2.27.3"},
			"gdrcopy":             {nvcrCloudNative, "gdrdrv", "v2.5.2"},
			"vgpuDeviceManager":   {nvcrCloudNative, "vgpu-device-manager", "v0.4.2"},
			"sandboxDevicePlugin": {nvcr, "kubevirt-gpu-device-plugin", "v1.5.0"},
			// Not in deployments/gpu-operator/values.yaml of NVIDIA/gpu-operator at each release tag, which starts
			// this component at v26.7.0: the Kata sandbox device plugin (and sandboxWorkloads.mode) came with
			// v26.3.0 (NVIDIA/gpu-operator#2142), and the v26.3.3 OLM bundle pins v0.0.3
			// (redhat-openshift-ecosystem/certified-operators, operators/gpu-operator-certified/26.3.3,
			// relatedImages kata-sandbox-device-plugin-image).
			"kataSandboxDevicePlugin": {nvcrCloudNative, "nvidia-sandbox-device-plugin", "v0.0.3"},
			"ccManager":               {nvcrCloudNative, "k8s-cc-manager", "v0.4.0"},
			"vfioManager":             {nvcrCloudNative, "k8s-driver-manager", "v0.11.0"},
		},
		NFD: Image{nfdRegistry, "node-feature-discovery", "v0.18.3"},
		// GPU Operator v26.3.x: Kubernetes 1.32-1.36 as the v26.3.2 documentation lists them (v26.3.0
		// listed 1.32-1.35), OpenShift 4.17-4.21, containerd 1.7-2.2
		// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/platform-support.html).
		Kubernetes:        "1.32 - 1.36",
		KubernetesMinimum: "1.32",
		OpenShift:         "4.17 - 4.21",
		Containerd:        "1.7 - 2.2",
		Notes: []string{
			"Deprecated: since v26.7.0 NVIDIA gives the 26.3 line critical and CVE fixes only (life-cycle policy).",
			"Kubernetes 1.36 was added by the v26.3.2 documentation; v26.3.0 was tested on 1.32 to 1.35.",
			"The VFIO manager runs the k8s-driver-manager image from v26.3 on (a CUDA base image before).",
		},
	}
}

// release25101 is GPU Operator v25.10.1.
func release25101() Bundle {
	return Bundle{
		Version: "v25.10.1",
		Images: map[string]Image{
			"operator":           {nvcr, "gpu-operator", "v25.10.1"},
			"validator":          {nvcr, "gpu-operator", "v25.10.1"},
			"nodeStatusExporter": {nvcr, "gpu-operator", "v25.10.1"},
			"driver":             {nvcr, "driver", "580.105.08"},
			"driverManager":      {nvcrCloudNative, "k8s-driver-manager", "v0.9.1"},
			// From v25.10 the toolkit and MIG manager tags have no -ubuntu20.04 suffix.
			"toolkit":             {nvcrK8s, "container-toolkit", "v1.18.1"},
			"devicePlugin":        {nvcr, "k8s-device-plugin", "v0.18.1"},
			"gfd":                 {nvcr, "k8s-device-plugin", "v0.18.1"},
			"dcgmExporter":        {nvcrK8s, "dcgm-exporter", "4.4.2-4.7.0-distroless"},
			"dcgm":                {nvcrCloudNative, "dcgm", "4.4.2-1-ubuntu22.04"},
			"migManager":          {nvcrCloudNative, "k8s-mig-manager", "v0.13.1"},
			"gds":                 {nvcrCloudNative, "nvidia-fs", "2.26.6"},
			"gdrcopy":             {nvcrCloudNative, "gdrdrv", "v2.5.1"},
			"vgpuDeviceManager":   {nvcrCloudNative, "vgpu-device-manager", "v0.4.1"},
			"sandboxDevicePlugin": {nvcr, "kubevirt-gpu-device-plugin", "v1.4.0"},
			"ccManager":           {nvcrCloudNative, "k8s-cc-manager", "v0.1.1"},
			// Up to v25.10 the VFIO manager is a CUDA base image, not the driver manager.
			"vfioManager": {nvcr, "cuda", "13.0.1-base-ubi9"},
		},
		NFD: Image{nfdRegistry, "node-feature-discovery", "v0.18.2"},
		// GPU Operator v25.10.0/v25.10.1: Kubernetes 1.30-1.34, OpenShift 4.14-4.20, containerd
		// 1.7-2.1 (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/platform-support.html).
		Kubernetes:        "1.30 - 1.34",
		KubernetesMinimum: "1.30",
		OpenShift:         "4.14 - 4.20",
		Containerd:        "1.7 - 2.1",
		Notes: []string{
			"Unsupported: NVIDIA supports the current major (26.7) and gives the previous one (26.3) critical and CVE fixes only.",
			"No Kata sandbox device plugin and no sandboxWorkloads.mode: Kata sandbox workloads need v26.3 or newer.",
			"The VFIO manager is the CUDA base image nvcr.io/nvidia/cuda:13.0.1-base-ubi9.",
		},
	}
}

// List returns every release gpuctl can install, newest first.
func List() []Bundle {
	return catalog()
}

// Default returns the release gpuctl installs when no version is asked for.
func Default() Bundle {
	all := catalog()
	for _, b := range all {
		if b.Default {
			return b
		}
	}
	// Unreachable: the catalog test proves exactly one bundle is the default.
	return all[0]
}

// Get returns the release with the given version, written with or without the leading "v"
// ("26.7.0" or "v26.7.0"). An empty version means the default release.
func Get(version string) (Bundle, error) {
	want := strings.TrimSpace(version)
	if want == "" {
		return Default(), nil
	}
	if !strings.HasPrefix(want, "v") && !strings.HasPrefix(want, "V") {
		want = "v" + want
	}
	want = "v" + want[1:]
	var versions []string
	for _, b := range catalog() {
		if b.Version == want {
			return b, nil
		}
		versions = append(versions, b.Version)
	}
	return Bundle{}, fmt.Errorf("unknown GPU Operator version %q: gpuctl can install %s",
		version, strings.Join(versions, ", "))
}
