package bundle

import (
	"fmt"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sort"
	"strings"
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

// OperandImages returns every image the operator of release version deploys for a ClusterPolicy
// spec, with the controller's own rules: an image is <repository>/<image>:<version> (…@<version> for
// a sha256: digest), the image alone when repository and version are both empty (ImagePath in
// api/nvidia/v1/clusterpolicy_types.go), and the driver's, GDS's, GDRCopy's and the vGPU manager's
// tags get "-<os tag>" of the GPU nodes appended unless they are digests (resolveDriverTag). osTags are
// the node OS tags to list those images for ("ubuntu22.04", "rhel9", "rhcos4.18"). notes say what
// cannot be listed: an image left empty (the operator would take it from its environment, as under OLM)
// and precompiled drivers, whose tag carries each node's kernel version.
func OperandImages(version string, spec map[string]any, osTags []string) ([]OperandImage, []string) {
	var out []OperandImage
	var notes []string
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
		if pre, _ := m["usePrecompiled"].(bool); name == "driver" && pre {
			notes = append(notes, "driver.usePrecompiled: the driver image tag is "+ver+"-<kernel version>-<os tag> per node; list those tags from your nodes' kernels")
			continue
		}
		if !op.osTag || strings.HasPrefix(ver, "sha256:") {
			out = append(out, OperandImage{Image: ref, Component: name})
			continue
		}
		for _, os := range osTags {
			out = append(out, OperandImage{Image: ref + "-" + os, Component: name, OS: os})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Image < out[j].Image })
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
