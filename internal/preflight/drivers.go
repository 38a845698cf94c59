package preflight

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/driverimage"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// TagLister lists an image repository's tags ("nvcr.io/nvidia/driver"); dockerConfigs are the
// .dockerconfigjson of the pull secrets the install names, whose login for the registry it may use.
// driverimage.Registry is the real one.
type TagLister interface {
	Tags(ctx context.Context, repository string, dockerConfigs [][]byte) ([]string, error)
}

// precompiledDocs is NVIDIA's page on precompiled driver containers: Ubuntu only, tagged by driver
// branch, kernel and OS, published for some kernels.
const precompiledDocs = "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/precompiled-drivers.html"

// checkDriverNodes: what the driver container meets on each GPU node, from the Node objects
// (status.nodeInfo), no pod: the kernel the driver is built or chosen for, the OS image it is tagged
// for, and the runtime the toolkit configures. Nodes alike are one line.
func checkDriverNodes(_ context.Context, env *Env) Result {
	if r, ok := needDetection(env); !ok {
		return r
	}
	nodes, guessed := driverCandidates(env.Detection)
	if len(nodes) == 0 {
		return skip("no GPU node or worker found yet")
	}
	type group struct {
		kernel, os, runtime string
		names               []string
	}
	byKey := map[string]*group{}
	var keys []string
	for _, n := range nodes {
		k := n.Kernel + "\x00" + n.OSImage + "\x00" + n.Runtime
		g, ok := byKey[k]
		if !ok {
			g = &group{kernel: orUnknown(n.Kernel), os: orUnknown(n.OSImage), runtime: orUnknown(n.Runtime)}
			byKey[k] = g
			keys = append(keys, k)
		}
		g.names = append(g.names, n.Name)
	}
	sort.Strings(keys)
	var lines []string
	if guessed {
		lines = append(lines, "no node shows its GPU yet (NFD has not run); the workers:")
	}
	for _, k := range keys {
		g := byKey[k]
		lines = append(lines, fmt.Sprintf("kernel %s, %s, %s: %s", g.kernel, g.os, g.runtime, listNames(g.names)))
	}
	return pass(strings.Join(lines, "\n"))
}

// driverCandidates are the GPU nodes; before any node shows its GPU (NFD has not labelled them), the
// workers, any of which may be a GPU node: guessed is then true, and what is found about them is a
// warning at most. A worker pool with one kernel and one OS image gives its nodes by name; one with
// several gives one entry per kernel, named after the pool.
func driverCandidates(d *detect.Result) (nodes []detect.GPUNode, guessed bool) {
	if len(d.GPUNodes) > 0 {
		return d.GPUNodes, false
	}
	for _, p := range d.Pools {
		if p.ControlPlane {
			continue
		}
		runtime, osImage := "", ""
		if len(p.Runtimes) == 1 {
			runtime = p.Runtimes[0]
		}
		if len(p.OSImages) == 1 {
			osImage = p.OSImages[0]
		}
		if len(p.Kernels) == 1 {
			for _, name := range p.Nodes {
				nodes = append(nodes, detect.GPUNode{Name: name, Pool: p.Name, Kernel: p.Kernels[0], OSImage: osImage, Runtime: runtime})
			}
			continue
		}
		for _, k := range p.Kernels {
			nodes = append(nodes, detect.GPUNode{Name: "pool " + p.Name, Pool: p.Name, Kernel: k, OSImage: osImage, Runtime: runtime})
		}
	}
	return nodes, true
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// checkPrecompiledDriver: with driver.usePrecompiled=true, the registry the driver image is pulled
// from has the image for every GPU node's kernel. NVIDIA publishes precompiled images for some kernels
// only, and a node whose kernel has none never gets a driver (NVIDIA/gpu-operator#910, #1203, #933).
// The registry is asked through the OCI distribution API's tag list; one that cannot be reached
// (air-gapped, offline) is a warning, within driverimage's per-request deadline.
func checkPrecompiledDriver(ctx context.Context, env *Env) Result {
	if r, ok := needDetection(env); !ok {
		return r
	}
	if r, ok := needPlan(env); !ok {
		return r
	}
	var specs []driverimage.Spec
	for _, s := range driverimage.Specs(env.Objects) {
		if s.Precompiled {
			specs = append(specs, s)
		}
	}
	if len(specs) == 0 {
		return skip("driver.usePrecompiled is not set: the driver container builds the driver for each node's kernel")
	}
	if nodes, _ := driverCandidates(env.Detection); len(nodes) == 0 {
		return skip("no GPU node or worker found yet: no kernel to look for")
	}
	if env.Tags == nil {
		return skip("no registry to ask")
	}
	var fails, warns, passes, hints []string
	// Each repository is asked once, however many NVIDIADrivers pull from it.
	lists := map[string]tagList{}
	for _, s := range specs {
		f, w, p, h := judgePrecompiled(ctx, env, s, lists)
		fails, warns, passes = append(fails, f...), append(warns, w...), append(passes, p...)
		for _, hint := range h {
			if !slices.Contains(hints, hint) {
				hints = append(hints, hint)
			}
		}
	}
	_, guessed := driverCandidates(env.Detection)
	switch {
	case len(fails) > 0 && guessed:
		// Workers that may not be GPU nodes: a warning until NFD shows which are.
		return warn(strings.Join(append(append([]string{"no node shows its GPU yet (NFD has not run); if these workers are GPU nodes:"}, fails...), warns...), "\n"), strings.Join(hints, "; "))
	case len(fails) > 0:
		return fail(strings.Join(append(fails, warns...), "\n"), strings.Join(hints, "; "))
	case len(warns) > 0:
		return warn(strings.Join(warns, "\n"), strings.Join(hints, "; "))
	}
	return pass(strings.Join(passes, "\n"))
}

// tagList is a repository's answer to the tag list.
type tagList struct {
	tags []string
	err  error
}

// judgePrecompiled looks up one driver's tags for the GPU nodes it serves: lines for the nodes
// without an image (fails), the nodes it cannot tell about (warnings), the nodes with one (passes),
// and the hints.
func judgePrecompiled(ctx context.Context, env *Env, s driverimage.Spec, lists map[string]tagList) (fails, warns, passes, hints []string) {
	nodes, err := selectedGPUNodes(ctx, env, s.NodeSelector)
	if err != nil {
		return nil, []string{fmt.Sprintf("%s: cannot list the nodes its nodeSelector picks: %v", s.Owner, err)}, nil, nil
	}
	if len(nodes) == 0 {
		return nil, nil, []string{s.Owner + ": selects no GPU node"}, nil
	}
	repo := s.Repository + "/" + s.Image
	byTag, untagged := precompiledTags(nodes, s.Version)
	if len(untagged) > 0 {
		warns = append(warns, fmt.Sprintf("%s: cannot tell the precompiled image of %s (OS image or kernel not known to gpuctl)", s.Owner, listNames(untagged)))
		hints = append(hints, "NVIDIA publishes precompiled drivers for Ubuntu only: "+precompiledDocs)
	}
	if len(byTag) == 0 {
		return fails, warns, passes, hints
	}
	l, asked := lists[repo]
	if !asked {
		l.tags, l.err = env.Tags.Tags(ctx, repo, driverimage.PullSecretConfigs(ctx, env.Kube, env.Namespace, s.PullSecrets))
		lists[repo] = l
	}
	tags, err := l.tags, l.err
	if err != nil && !errors.Is(err, driverimage.ErrNoRepository) {
		if ctx.Err() != nil {
			return fails, warns, passes, hints
		}
		warns = append(warns, fmt.Sprintf("%s: cannot list the tags of %s (%v): whether it has a precompiled driver for %s is not known",
			s.Owner, repo, err, listNames(sortedKeys(byTag))))
		hints = append(hints, "offline or air-gapped: mirror the precompiled images for the GPU nodes' kernels (gpuctl images --registry, docs/air-gap.md) and install with --registry")
		return fails, warns, passes, hints
	}
	f, p := judgeTags(repo, byTag, tags)
	fails, passes = append(fails, f...), append(passes, p...)
	if len(fails) > 0 {
		if strings.Contains(s.Version, ".") {
			hints = append(hints, fmt.Sprintf("precompiled images are tagged by driver branch, not full version: set driver.version to the branch (e.g. %s)", strings.SplitN(s.Version, ".", 2)[0]))
		}
		hints = append(hints, "set driver.usePrecompiled=false to build the driver on those nodes, or run them on a kernel NVIDIA publishes a precompiled driver for ("+precompiledDocs+")")
	}
	return fails, warns, passes, hints
}

// precompiledTags are the precompiled driver tags of driver version the GPU nodes need, each with its
// nodes, and the nodes whose OS image or kernel gpuctl cannot tag.
func precompiledTags(nodes []detect.GPUNode, version string) (byTag map[string][]detect.GPUNode, untagged []string) {
	byTag = map[string][]detect.GPUNode{}
	for _, n := range nodes {
		osTag := driverimage.OSTagFromImage(n.OSImage)
		if osTag == "" || n.Kernel == "" {
			untagged = append(untagged, n.Name)
			continue
		}
		tag := driverimage.PrecompiledTag(version, n.Kernel, osTag)
		byTag[tag] = append(byTag[tag], n)
	}
	return byTag, untagged
}

// judgeTags judges each needed tag against the repository's tags: passes name the tags it has, fails
// those it lacks, each with its kernel and nodes.
func judgeTags(repo string, byTag map[string][]detect.GPUNode, tags []string) (fails, passes []string) {
	for _, tag := range sortedKeys(byTag) {
		ns := byTag[tag]
		var names []string
		for _, n := range ns {
			names = append(names, n.Name)
		}
		if slices.Contains(tags, tag) {
			passes = append(passes, fmt.Sprintf("%s:%s for kernel %s on %s", repo, tag, ns[0].Kernel, listNames(names)))
			continue
		}
		fails = append(fails, fmt.Sprintf("no precompiled driver %s:%s for kernel %s (%s) on %s", repo, tag, ns[0].Kernel, ns[0].OSImage, listNames(names)))
	}
	return fails, passes
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// selectedGPUNodes are the GPU nodes (driverCandidates) a driver's nodeSelector picks (all without one).
// A node NFD has not labelled yet is matched on the kernel label NFD will give it: an NVIDIADriver
// of --precompiled auto selects its kernel's nodes by that label.
func selectedGPUNodes(ctx context.Context, env *Env, selector map[string]string) ([]detect.GPUNode, error) {
	candidates, _ := driverCandidates(env.Detection)
	if len(selector) == 0 {
		return candidates, nil
	}
	if env.Kube == nil {
		return nil, errors.New("no cluster client")
	}
	list, err := env.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	nodeLabels := map[string]map[string]string{}
	for _, n := range list.Items {
		nodeLabels[n.Name] = n.Labels
	}
	sel := labels.SelectorFromSet(selector)
	var out []detect.GPUNode
	for _, n := range candidates {
		set := labels.Set{}
		maps.Copy(set, nodeLabels[n.Name])
		if _, ok := set[plan.KernelLabel]; !ok && n.Kernel != "" {
			set[plan.KernelLabel] = driverimage.KernelLabel(n.Kernel)
		}
		if sel.Matches(set) {
			out = append(out, n)
		}
	}
	return out, nil
}
