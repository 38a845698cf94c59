package render

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/driverimage"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// DefaultNodeOS returns the node OS tags the driver images are listed for when neither a cluster nor
// --node-os says which: the Ubuntu LTS releases NVIDIA publishes driver images for
// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/platform-support.html).
func DefaultNodeOS() []string { return []string{"ubuntu22.04", "ubuntu24.04"} }

// ImageList is the result of Images (printed with apiVersion and kind ImageList, as every document).
type ImageList struct {
	Distribution    string `json:"distribution"`
	Profile         string `json:"profile"`
	OperatorVersion string `json:"operatorVersion"`
	// Registry is the --registry mirror the images were rewritten to, if any.
	Registry string `json:"registry,omitempty"`
	// NodeOS are the node OS tags OS-specific images are listed for; NodeOSFrom says where they came from.
	NodeOS     []string `json:"nodeOS"`
	NodeOSFrom string   `json:"nodeOSFrom"`
	// Images are the images, sorted, each once.
	Images []ListedImage `json:"images"`
	// Notes say what is not listed, and why.
	Notes []string `json:"notes,omitempty"`
}

// ListedImage is one image and what pulls it.
type ListedImage struct {
	Image string `json:"image"`
	// UsedBy are the workloads ("DaemonSet gpu-operator/nfd-worker") or ClusterPolicy operands
	// ("ClusterPolicy cluster-policy: driver (ubuntu22.04)") that pull it.
	UsedBy []string `json:"usedBy"`
}

// ManifestImages lists the images of a rendered manifest: every container and init container of its
// workloads (Pods, Deployments, DaemonSets, StatefulSets, ReplicaSets, Jobs, CronJobs), and the
// operands the operator of release version deploys for each ClusterPolicy and NVIDIADriver in it,
// OS-specific ones for each of nodeOS, precompiled drivers for the kernels of gpuNodes (the GPU nodes
// when a cluster is detected). Images a pod never pulls (imagePullPolicy Never: preloaded on the node)
// are left out with a note.
func ManifestImages(manifest, version string, nodeOS []string, gpuNodes []detect.GPUNode) (*ImageList, error) {
	objs, err := DecodeManifest(manifest)
	if err != nil {
		return nil, fmt.Errorf("read rendered manifest: %w", err)
	}
	nodes := imageNodes(gpuNodes)
	drivers := driversByNode(objs, nodes)
	uses := &imageUses{used: map[string][]string{}}
	for _, u := range objs {
		o := u.Object
		kind, _ := o["kind"].(string)
		md, _ := o["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		ns, _ := md["namespace"].(string)
		spec, _ := o["spec"].(map[string]any)
		switch kind {
		case "ClusterPolicy":
			ops, notes := bundle.OperandImages(version, spec, nodeOS, nodes)
			uses.operands("ClusterPolicy "+name, ops, notes)
		case "NVIDIADriver":
			ops, notes := bundle.NVIDIADriverImages(spec, nodeOS, drivers[name])
			uses.operands("NVIDIADriver "+name, ops, notes)
		default:
			podSpec := PodSpecOf(kind, o)
			if podSpec == nil {
				continue
			}
			ref := kind + " " + name
			if ns != "" {
				ref = kind + " " + ns + "/" + name
			}
			uses.containers(ref, podSpec)
		}
	}
	return uses.list(), nil
}

// imageUses are the images of a manifest as they are found, each with what pulls it, and the notes
// on what is not listed.
type imageUses struct {
	used  map[string][]string
	notes []string
}

// add records that by pulls img.
func (u *imageUses) add(img, by string) {
	if !slices.Contains(u.used[img], by) {
		u.used[img] = append(u.used[img], by)
	}
}

// operands records the operand images the operator deploys for object, and its notes on them.
func (u *imageUses) operands(object string, ops []bundle.OperandImage, notes []string) {
	for _, op := range ops {
		u.add(op.Image, operandUser(object, op))
	}
	for _, s := range notes {
		u.notes = append(u.notes, object+": "+s)
	}
}

// containers records the images of the init containers and containers of podSpec, the pod spec of
// workload ref; an image a pod never pulls (imagePullPolicy Never) gets a note instead.
func (u *imageUses) containers(ref string, podSpec map[string]any) {
	for _, key := range []string{"initContainers", "containers"} {
		cs, _ := podSpec[key].([]any)
		for _, c := range cs {
			cm, _ := c.(map[string]any)
			img, _ := cm["image"].(string)
			cname, _ := cm["name"].(string)
			if img == "" {
				continue
			}
			if cm["imagePullPolicy"] == "Never" {
				u.notes = append(u.notes, fmt.Sprintf("%s: container %s runs %s with imagePullPolicy Never (preloaded on the node), so it is not listed", ref, cname, img))
				continue
			}
			u.add(img, ref)
		}
	}
}

// list is the ImageList of what was found: the images sorted, each once, with what pulls them sorted.
func (u *imageUses) list() *ImageList {
	out := &ImageList{Notes: u.notes}
	for img, by := range u.used {
		sort.Strings(by)
		out.Images = append(out.Images, ListedImage{Image: img, UsedBy: by})
	}
	sort.Slice(out.Images, func(i, j int) bool { return out.Images[i].Image < out.Images[j].Image })
	return out
}

// operandUser is what pulls an operand image: the object and the component, with its OS tag.
func operandUser(object string, op bundle.OperandImage) string {
	by := object + ": " + op.Component
	if op.OS != "" && !strings.Contains(op.Component, "precompiled") {
		by += " (" + op.OS + ")"
	}
	return by
}

// imageNodes are the GPU nodes with their OS tags.
func imageNodes(gpuNodes []detect.GPUNode) []bundle.Node {
	var out []bundle.Node
	for _, n := range gpuNodes {
		out = append(out, bundle.Node{Name: n.Name, Kernel: n.Kernel, OSTag: OSTag(n.OSImage)})
	}
	return out
}

// driversByNode gives each NVIDIADriver the GPU nodes it drives, as NVIDIA's controller routes them
// (v26.7): the nodes its nodeSelector on NFD's kernel label picks, every node for one without a
// selector that is not the default, and the nodes no other picks for the default. A selector on other
// labels picks nodes gpuctl cannot tell from here: none are listed (its precompiled images get a note).
func driversByNode(objs []*unstructured.Unstructured, nodes []bundle.Node) map[string][]bundle.Node {
	out := map[string][]bundle.Node{}
	picked := map[string]bool{}
	var defaults []string
	for _, u := range objs {
		if u.GetKind() != "NVIDIADriver" {
			continue
		}
		if isDefault, _, _ := unstructured.NestedBool(u.Object, "spec", "default"); isDefault {
			defaults = append(defaults, u.GetName())
			continue
		}
		sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "nodeSelector")
		kernel, byKernel := sel[plan.KernelLabel]
		for _, n := range nodes {
			if len(sel) == 0 || (len(sel) == 1 && byKernel && driverimage.KernelLabel(n.Kernel) == kernel) {
				out[u.GetName()] = append(out[u.GetName()], n)
				picked[n.Name] = true
			}
		}
	}
	for _, d := range defaults {
		for _, n := range nodes {
			if !picked[n.Name] {
				out[d] = append(out[d], n)
			}
		}
	}
	return out
}

// PodSpecOf returns the pod template's spec of a workload, or nil for anything else.
func PodSpecOf(kind string, o map[string]any) map[string]any {
	var path []string
	switch kind {
	case "Pod":
		path = []string{"spec"}
	case "Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job":
		path = []string{"spec", "template", "spec"}
	case "CronJob":
		path = []string{"spec", "jobTemplate", "spec", "template", "spec"}
	default:
		return nil
	}
	var cur any = o
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	m, _ := cur.(map[string]any)
	return m
}

// osImageTag matches the node OS names (status.nodeInfo.osImage) of the OSes NVIDIA publishes driver
// images for, whose tags the operator builds from the node's os-release ID and VERSION_ID
// (getGPUNodeOSTag in controllers/state_manager.go, NVIDIA/gpu-operator v26.7.0: RHEL, Rocky and
// Oracle Linux drop the minor version).
type osImagePattern struct {
	re *regexp.Regexp
	id string
}

func osImagePatterns() []osImagePattern {
	return []osImagePattern{
		{regexp.MustCompile(`(?i)^Red Hat Enterprise Linux CoreOS (\d)(\d+)\.`), "rhcos"},
		{regexp.MustCompile(`(?i)^Red Hat Enterprise Linux CoreOS (\d+\.\d+)`), "rhcos"},
		{regexp.MustCompile(`(?i)^Ubuntu (\d+\.\d+)`), "ubuntu"},
		{regexp.MustCompile(`(?i)^Red Hat Enterprise Linux (?:Server )?(\d+)`), "rhel"},
		{regexp.MustCompile(`(?i)^Rocky Linux (\d+)`), "rocky"},
		{regexp.MustCompile(`(?i)^Oracle Linux Server (\d+)`), "ol"},
		{regexp.MustCompile(`(?i)^Debian GNU/Linux (\d+)`), "debian"},
	}
}

// NodeOSTags returns the driver image OS tags of the GPU nodes, and where they came from.
func NodeOSTags(nodes []detect.GPUNode) ([]string, string) {
	seen := map[string]bool{}
	var tags, unknown []string
	for _, n := range nodes {
		tag := OSTag(n.OSImage)
		if tag == "" {
			if n.OSImage != "" && !slices.Contains(unknown, n.OSImage) {
				unknown = append(unknown, n.OSImage)
			}
			continue
		}
		if !seen[tag] {
			seen[tag] = true
			tags = append(tags, tag)
		}
	}
	sort.Strings(tags)
	if len(tags) == 0 {
		return nil, ""
	}
	from := "the GPU nodes' OS images"
	if len(unknown) > 0 {
		from += fmt.Sprintf(" (not recognised: %s)", strings.Join(unknown, ", "))
	}
	return tags, from
}

func OSTag(osImage string) string {
	for _, m := range osImagePatterns() {
		g := m.re.FindStringSubmatch(osImage)
		if g == nil {
			continue
		}
		if m.id == "rhcos" && len(g) == 3 {
			return "rhcos" + g[1] + "." + g[2] // "418.94…" is RHCOS 4.18
		}
		return m.id + g[1]
	}
	return ""
}
