package bundle

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// OperandImage is one image the operator of a release deploys for a ClusterPolicy.
type OperandImage struct {
	// Image is the reference the operator puts in the pod spec.
	Image string `json:"image"`
	// Component is the ClusterPolicy field it comes from ("driver", "driver.manager", "toolkit", …).
	Component string `json:"component"`
	// OS is the node OS tag the image is for ("ubuntu22.04"), for the images whose tag the operator
	// suffixes with the node's OS; empty for the others.
	OS string `json:"os,omitempty"`
}

// operand is one image-carrying field of the ClusterPolicy spec and the rule by which the operator of
// a release deploys it.
type operand struct {
	// path is the field in the spec; enabled is the spec field that switches it (nil: the path's own).
	path []string
	// defaultOn is what its IsEnabled returns when enabled is unset.
	defaultOn bool
	// sandbox marks the states the operator adds only with sandboxWorkloads.enabled; mode, when set,
	// is the sandboxWorkloads.mode the release requires too.
	sandbox bool
	mode    string
	// osTag marks images whose tag the operator suffixes with "-<os tag>" of the GPU nodes.
	osTag bool
	// parent, when set, is the operand whose state deploys this image (a driver manager init
	// container runs only where its parent does).
	parent []string
}

// operands lists, for the operator of release version, every image the ClusterPolicy controller can
// deploy and when it does. The rules are NVIDIA's controller's own, and agree for the three releases
// except where noted: ClusterPolicyController.isStateEnabled in controllers/state_manager.go, the
// IsEnabled defaults in api/nvidia/v1/clusterpolicy_types.go, and resolveDriverTag in
// controllers/object_controls.go (https://github.com/NVIDIA/gpu-operator at v26.7.0, v26.3.3 and
// v25.10.1). The validator image is also every operand's init container, so it is always pulled.
func operands(version string) []operand {
	v26 := strings.HasPrefix(version, "v26.")
	// The KubeVirt and Kata device plugins and the CC manager depend on sandboxWorkloads.mode since
	// v26.3 (isStateEnabled at v26.3.3); v25.10.1 deploys them on sandboxWorkloads.enabled alone.
	kubevirt, kata := "", ""
	if v26 {
		kubevirt, kata = "kubevirt", "kata"
	}
	ops := []operand{
		{path: []string{"validator"}, defaultOn: true},
		{path: []string{"driver"}, defaultOn: true, osTag: true},
		{path: []string{"driver", "manager"}, defaultOn: true, parent: []string{"driver"}},
		{path: []string{"gds"}, osTag: true, parent: []string{"driver"}},
		{path: []string{"gdrcopy"}, osTag: true, parent: []string{"driver"}},
		{path: []string{"toolkit"}, defaultOn: true},
		{path: []string{"devicePlugin"}, defaultOn: true},
		{path: []string{"dcgm"}, defaultOn: true},
		{path: []string{"dcgmExporter"}, defaultOn: true},
		{path: []string{"gfd"}, defaultOn: true},
		{path: []string{"migManager"}, defaultOn: true},
		{path: []string{"nodeStatusExporter"}},
		{path: []string{"vgpuManager"}, sandbox: true, osTag: true},
		{path: []string{"vgpuManager", "driverManager"}, defaultOn: true, sandbox: true, parent: []string{"vgpuManager"}},
		{path: []string{"vgpuDeviceManager"}, sandbox: true},
		{path: []string{"vfioManager"}, sandbox: true},
		{path: []string{"vfioManager", "driverManager"}, defaultOn: true, sandbox: true, parent: []string{"vfioManager"}},
		{path: []string{"sandboxDevicePlugin"}, sandbox: true, mode: kubevirt},
		{path: []string{"ccManager"}, sandbox: true, mode: kata},
	}
	if v26 {
		ops = append(ops, operand{path: []string{"kataSandboxDevicePlugin"}, sandbox: true, mode: "kata"})
	} else {
		// The Kata manager is deprecated from v26.3 on: isStateEnabled returns false for it.
		ops = append(ops, operand{path: []string{"kataManager"}, sandbox: true})
	}
	return ops
}

// Node is a GPU node as the image list needs it: its kernel (status.nodeInfo.kernelVersion) and the
// operator's OS tag for it ("ubuntu24.04"; "" when gpuctl cannot tell).
type Node struct {
	Name, Kernel, OSTag string
}

// OperandImages returns every image the operator of release version deploys for a ClusterPolicy
// spec, with the controller's own rules: an image is <repository>/<image>:<version> (…@<version> for
// a sha256: digest), the image alone when repository and version are both empty (ImagePath in
// api/nvidia/v1/clusterpolicy_types.go), and the driver's, GDS's, GDRCopy's and the vGPU manager's
// tags get "-<os tag>" of the GPU nodes appended unless they are digests (resolveDriverTag). osTags are
// the node OS tags to list those images for ("ubuntu22.04", "rhel9", "rhcos4.18"). A precompiled
// driver's tag carries each node's kernel as well: it is listed for nodes, the GPU nodes when known.
// A driver handed to NVIDIADriver objects (useNvidiaDriverCRD) is theirs, not the ClusterPolicy's: the
// controller skips its driver and vGPU manager states then (ClusterPolicyController.step in
// controllers/state_manager.go at v26.7.0), and NVIDIADriverImages lists each NVIDIADriver's. notes say
// what cannot be listed: an image left empty (the operator would take it from its environment, as under
// OLM), and precompiled drivers when no node is known.
func OperandImages(version string, spec map[string]any, osTags []string, nodes []Node) ([]OperandImage, []string) {
	var out []OperandImage
	var notes []string
	handedOver, _ := specAt(spec, "driver", "useNvidiaDriverCRD").(bool)
	sandbox := isOn(spec, false, "sandboxWorkloads")
	mode, _ := specAt(spec, "sandboxWorkloads", "mode").(string)
	if mode == "" {
		mode = "container"
		if sandbox {
			mode = "kubevirt" // SandboxWorkloadsSpec.Mode defaults to kubevirt (+kubebuilder:default)
		}
	}
	for _, op := range operands(version) {
		if op.sandbox && !sandbox {
			continue
		}
		if op.mode != "" && op.mode != mode {
			continue
		}
		if op.parent != nil && !isOn(spec, parentDefault(op.parent), op.parent...) {
			continue
		}
		// A driver manager has no switch of its own; it runs wherever its parent does.
		if op.parent == nil || len(op.path) == 1 {
			if !isOn(spec, op.defaultOn, op.path...) {
				continue
			}
		}
		name := strings.Join(op.path, ".")
		if handedOver && (op.path[0] == "driver" || slices.Equal(op.parent, []string{"driver"}) || op.path[0] == "vgpuManager") {
			continue
		}
		m, _ := specAt(spec, op.path...).(map[string]any)
		repo, _ := m["repository"].(string)
		img, _ := m["image"].(string)
		ver := fmt.Sprint(orEmpty(m["version"]))
		ref, err := imagePath(repo, img, ver)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: %v; the operator would not deploy it", name, err))
			continue
		}
		if ref == "" {
			notes = append(notes, name+": no image in the ClusterPolicy; the operator takes it from its own environment (as under OLM), so it is not listed")
			continue
		}
		pre, _ := m["usePrecompiled"].(bool)
		imgs, note := imagesOf(ref, ver, name, name == "driver" && pre, op.osTag, osTags, nodes)
		out = append(out, imgs...)
		if note != "" {
			notes = append(notes, note)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Image < out[j].Image })
	return out, notes
}

// imagesOf are the images of one operand's image ref: a precompiled driver's for each node's kernel,
// ref suffixed with each OS tag where the operator suffixes it (osTag; not for a digest), else ref.
func imagesOf(ref, ver, component string, precompiled, osTag bool, osTags []string, nodes []Node) ([]OperandImage, string) {
	switch {
	case precompiled:
		return precompiledImages(ref, ver, component, nodes)
	case !osTag || strings.HasPrefix(ver, "sha256:"):
		return []OperandImage{{Image: ref, Component: component}}, ""
	}
	var out []OperandImage
	for _, os := range osTags {
		out = append(out, OperandImage{Image: ref + "-" + os, Component: component, OS: os})
	}
	return out, ""
}

// precompiledImages are a precompiled driver's images for nodes: ref-<kernel>-<os tag> for each
// kernel and OS (GetPrecompiledImagePath in api/nvidia/v1alpha1/nvidiadriver_types.go at v26.7.0); a
// note instead when no node is known, and for nodes whose OS gpuctl cannot tag.
func precompiledImages(ref, ver, component string, nodes []Node) ([]OperandImage, string) {
	if len(nodes) == 0 {
		return nil, component + ": precompiled, the driver image tag is " + ver + "-<kernel version>-<os tag> per node; list those tags from your nodes' kernels (or run gpuctl images against the cluster)"
	}
	var out []OperandImage
	var untagged []string
	seen := map[string]bool{}
	for _, n := range nodes {
		if n.OSTag == "" || n.Kernel == "" {
			untagged = append(untagged, n.Name)
			continue
		}
		img := ref + "-" + n.Kernel + "-" + n.OSTag
		if !seen[img] {
			seen[img] = true
			out = append(out, OperandImage{Image: img, Component: component + " (precompiled, kernel " + n.Kernel + ")", OS: n.OSTag})
		}
	}
	if len(untagged) > 0 {
		return out, component + ": precompiled, and gpuctl cannot tell the image of " + strings.Join(untagged, ", ") + " (OS image or kernel not known)"
	}
	return out, ""
}

// NVIDIADriverImages returns the images NVIDIA's NVIDIADriver controller deploys for one NVIDIADriver
// spec: the driver (precompiled for each of nodes, the GPU nodes it selects; else for each OS tag), its
// driver manager, and GDS and GDRCopy where enabled (their images suffixed with the OS tag, as the
// driver's) (internal/state/driver.go and api/nvidia/v1alpha1/nvidiadriver_types.go at v26.7.0).
func NVIDIADriverImages(spec map[string]any, osTags []string, nodes []Node) ([]OperandImage, []string) {
	var out []OperandImage
	var notes []string
	for _, part := range []struct {
		path   []string
		osTag  bool
		always bool
	}{{nil, true, true}, {[]string{"manager"}, false, true}, {[]string{"gds"}, true, false}, {[]string{"gdrcopy"}, true, false}} {
		m := spec
		name := "driver"
		if part.path != nil {
			m, _ = specAt(spec, part.path...).(map[string]any)
			name = "driver." + strings.Join(part.path, ".")
		}
		if m == nil || (!part.always && m["enabled"] != true) {
			continue
		}
		repo, _ := m["repository"].(string)
		img, _ := m["image"].(string)
		ver := fmt.Sprint(orEmpty(m["version"]))
		ref, err := imagePath(repo, img, ver)
		if err != nil || ref == "" {
			notes = append(notes, fmt.Sprintf("%s: no complete image (repository %q, image %q, version %q); the operator would not deploy it", name, repo, img, ver))
			continue
		}
		pre, _ := spec["usePrecompiled"].(bool)
		imgs, note := imagesOf(ref, ver, name, part.path == nil && pre, part.osTag, osTags, nodes)
		out = append(out, imgs...)
		if note != "" {
			notes = append(notes, note)
		}
	}
	return out, notes
}

// parentDefault is the IsEnabled default of a parent operand (driver: on; vGPU and VFIO managers: off).
func parentDefault(path []string) bool { return len(path) == 1 && path[0] == "driver" }

// imagePath is NVIDIA's imagePath without its environment fallback (that is the operator pod's, which
// gpuctl's chart leaves empty): "" when the spec names no image.
func imagePath(repository, image, version string) (string, error) {
	if repository == "" && version == "" {
		return image, nil
	}
	if repository == "" || image == "" || version == "" {
		return "", fmt.Errorf("invalid image specification: repository, image and version must all be set (repository=%s, image=%s, version=%s)", repository, image, version)
	}
	if strings.HasPrefix(version, "sha256:") {
		return repository + "/" + image + "@" + version, nil
	}
	return repository + "/" + image + ":" + version, nil
}

// isOn reads <path>.enabled, def when it is unset.
func isOn(spec map[string]any, def bool, path ...string) bool {
	m, ok := specAt(spec, path...).(map[string]any)
	if !ok {
		return def
	}
	b, ok := m["enabled"].(bool)
	if !ok {
		return def
	}
	return b
}

func specAt(m map[string]any, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(m, path...)
	return v
}

func orEmpty(v any) any {
	if v == nil {
		return ""
	}
	return v
}
