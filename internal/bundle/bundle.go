package bundle

// Image is one container image as NVIDIA's chart values and the ClusterPolicy name it:
// <Repository>/<Image>:<Version>.
type Image struct {
	// Repository is the registry path without the image name, e.g. "nvcr.io/nvidia/cloud-native".
	Repository string
	// Image is the image name, e.g. "k8s-driver-manager".
	Image string
	// Version is the tag, e.g. "v0.12.0". The driver's is the driver version alone: the operator
	// appends "-<os>" to it per node (deployments/gpu-operator/values.yaml of NVIDIA/gpu-operator at each release tag).
	Version string
}

// String returns the image reference, e.g. "nvcr.io/nvidia/gpu-operator:v26.7.0".
func (i Image) String() string {
	return i.Repository + "/" + i.Image + ":" + i.Version
}

// Bundle is one GPU Operator release as gpuctl installs it.
type Bundle struct {
	// Version is NVIDIA's release tag with its leading "v", e.g. "v26.7.0"; it is also the published
	// chart's version (NVIDIA/gpu-operator .github/workflows/release-rc-assets.yaml@v26.7.0).
	Version string
	// Default marks the release gpuctl installs when --operator-version is not given.
	Default bool
	// Images holds each component's image, keyed by the component's key in the chart values
	// (operator, validator, driver, driverManager for driver.manager, toolkit, ...). A component
	// the release does not ship is absent.
	Images map[string]Image
	// NFD is the node-feature-discovery image NVIDIA's chart of this release depends on.
	NFD Image
	// Kubernetes, OpenShift and Containerd are the minor versions NVIDIA tested this release on, as
	// Masterminds semver hyphen ranges ("1.33 - 1.36"; the upper end includes its patch releases).
	Kubernetes string
	OpenShift  string
	Containerd string
	// KubernetesMinimum is the oldest Kubernetes minor ("1.32") NVIDIA supports at all; it can be
	// below Kubernetes when an older minor is validated only on some platforms (see belowRange).
	KubernetesMinimum string
	// Notes are facts about the release worth showing before installing it.
	Notes []string

	// belowRange qualifies Kubernetes versions from KubernetesMinimum up to the tested range, e.g.
	// "validated only on Ubuntu 24.04 nodes".
	belowRange string
}

// component says where the chart values hold one entry of Bundle.Images. One image can sit at
// several places: NVIDIA's chart repeats the driver manager under vgpuManager and vfioManager.
type component struct {
	key   string
	paths [][]string
}

// components lists every image-carrying key of charts/gpu-operator/values.yaml (and of NVIDIA's
// NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0) that a bundle pins. vgpuManager's own image is
// left out: it is built by the user from NVIDIA's licensed .run file, so no release has one to pin.
// operator.initContainer is left out too: it is empty unless a user sets it (OpenShift only).
func components() []component {
	one := func(key string, path ...string) component {
		return component{key: key, paths: [][]string{path}}
	}
	return []component{
		one("operator", "operator"),
		one("validator", "validator"),
		one("nodeStatusExporter", "nodeStatusExporter"),
		one("driver", "driver"),
		{key: "driverManager", paths: [][]string{
			{"driver", "manager"},
			{"vgpuManager", "driverManager"},
			{"vfioManager", "driverManager"},
		}},
		one("toolkit", "toolkit"),
		one("devicePlugin", "devicePlugin"),
		one("gfd", "gfd"),
		one("dcgmExporter", "dcgmExporter"),
		one("dcgm", "dcgm"),
		one("migManager", "migManager"),
		one("gds", "gds"),
		one("gdrcopy", "gdrcopy"),
		one("vgpuDeviceManager", "vgpuDeviceManager"),
		one("sandboxDevicePlugin", "sandboxDevicePlugin"),
		one("kataSandboxDevicePlugin", "kataSandboxDevicePlugin"),
		one("draDriver", "draDriver"),
		one("ccManager", "ccManager"),
		one("vfioManager", "vfioManager"),
	}
}

// Values returns the gpu-operator chart values that pin this bundle's images: for each component,
// <path>.repository, <path>.image and <path>.version, and nothing else. For the default bundle they
// equal the chart's own defaults, with the operator, validator and node status exporter versions
// spelled out instead of left to the chart's appVersion. A component the release does not ship keeps
// the chart's default. The map is new on every call.
func (b Bundle) Values() map[string]any {
	out := map[string]any{}
	for _, c := range components() {
		img, ok := b.Images[c.key]
		if !ok {
			continue
		}
		for _, p := range c.paths {
			m := out
			for _, k := range p {
				next, ok := m[k].(map[string]any)
				if !ok {
					next = map[string]any{}
					m[k] = next
				}
				m = next
			}
			m["repository"] = img.Repository
			m["image"] = img.Image
			m["version"] = img.Version
		}
	}
	return out
}

// NFDValues returns the node-feature-discovery chart values that pin this bundle's NFD image
// (image.repository and image.tag; that chart joins repository and image name in one key). gpuctl's
// NFD chart is written for NFD v0.19.0, so an older bundle's NFD image runs under v0.19.0's templates.
func (b Bundle) NFDValues() map[string]any {
	return map[string]any{
		"image": map[string]any{
			"repository": b.NFD.Repository + "/" + b.NFD.Image,
			"tag":        b.NFD.Version,
		},
	}
}
