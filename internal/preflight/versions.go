package preflight

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/distro"
)

// platformSupport is NVIDIA's support matrix, where newer GPU Operator releases list newer platforms.
const platformSupport = "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/platform-support.html"

// verdictResult turns a bundle's Verdict into a Result: newer than tested is a warning (it will
// probably work), older than supported a failure, unreadable a warning.
func verdictResult(v bundle.Verdict, hintOlder string) Result {
	switch v.Status {
	case bundle.Supported:
		return pass(v.Message)
	case bundle.Older:
		return fail(v.Message, hintOlder)
	default:
		return warn(v.Message, platformSupport)
	}
}

// checkKubernetesVersion: the API server's version, and every kubelet's, within the bundle's range.
// Kubelets count because the operands run on them: a control plane upgraded ahead of its nodes still
// leaves the GPU nodes on the old version.
func checkKubernetesVersion(_ context.Context, env *Env) Result {
	if r, ok := needDetection(env); !ok {
		return r
	}
	d := env.Detection
	if d.KubernetesVersion == "" && len(d.KubeletVersions) == 0 {
		return warn("neither the API server nor the nodes reported a version", platformSupport)
	}
	const hintOlder = "upgrade the cluster, or install an older GPU Operator release whose range includes this version"
	type judged struct {
		what string
		r    Result
	}
	var all []judged
	if d.KubernetesVersion != "" {
		all = append(all, judged{"API server " + d.KubernetesVersion, verdictResult(env.Bundle.CheckKubernetes(d.KubernetesVersion), hintOlder)})
	}
	kubelets := slices.Clone(d.KubeletVersions)
	sort.Strings(kubelets)
	for _, v := range slices.Compact(kubelets) {
		if v == d.KubernetesVersion {
			continue
		}
		all = append(all, judged{"kubelet " + v + " on " + nodesWithKubelet(d.Pools, v), verdictResult(env.Bundle.CheckKubernetes(v), hintOlder)})
	}
	worst := all[0].r
	for _, j := range all[1:] {
		if rank(j.r.Status) > rank(worst.Status) {
			worst = j.r
		}
	}
	if worst.Status == StatusPass {
		return worst
	}
	var lines []string
	for _, j := range all {
		if j.r.Status != StatusPass {
			lines = append(lines, j.what+": "+j.r.Message)
		}
	}
	if len(all) == 1 {
		return worst
	}
	worst.Message = strings.Join(lines, "\n")
	return worst
}

// nodesWithKubelet names the pools whose nodes report the kubelet version.
func nodesWithKubelet(pools []detect.Pool, version string) string {
	var names []string
	for _, p := range pools {
		if slices.Contains(p.KubeletVersions, version) {
			names = append(names, "pool "+p.Name)
		}
	}
	if len(names) == 0 {
		return "some nodes"
	}
	return listNames(names)
}

// checkOpenShiftVersion: on OpenShift, the ClusterVersion within the bundle's range.
func checkOpenShiftVersion(_ context.Context, env *Env) Result {
	if r, ok := needDetection(env); !ok {
		return r
	}
	d := env.Detection.Distribution
	if d.Name != distro.OpenShift {
		return skip("does not apply: not OpenShift")
	}
	if d.Version == "" {
		return warn("OpenShift's version could not be read (ClusterVersion version)", "gpuctl goes ahead without knowing whether NVIDIA supports it")
	}
	return verdictResult(env.Bundle.CheckOpenShift(d.Version),
		"upgrade OpenShift, or install an older GPU Operator release whose range includes this version")
}

// checkContainerdVersion: the container runtime of every GPU node (the toolkit configures it) within
// the bundle's range. Before any GPU node is known every worker's runtime is judged, and a runtime
// that is too old is only a warning: it may not be on a GPU node.
func checkContainerdVersion(_ context.Context, env *Env) Result {
	if r, ok := needDetection(env); !ok {
		return r
	}
	d := env.Detection
	nodes := runtimeCounts(d)
	if len(nodes) == 0 {
		return skip("does not apply: no node reports its container runtime")
	}
	runtimes := make([]string, 0, len(nodes))
	for rt := range nodes {
		runtimes = append(runtimes, rt)
	}
	sort.Strings(runtimes)

	worst := StatusPass
	var lines []string
	var passes []string
	for _, rt := range runtimes {
		r := verdictResult(env.Bundle.CheckContainerd(rt), "")
		// containerd 1.7 below the bundle's tested range is a warning, not a stop: 1.8 never shipped
		// (1.7 went to 2.0), 1.7 is what many platforms run (TKGS, AKS, MicroK8s), and NVIDIA tested it
		// up to v26.3 (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/platform-support.html).
		// Older containerd and Docker still fail.
		if r.Status == StatusFail && (len(d.GPUNodes) == 0 || strings.HasPrefix(rt, "containerd://1.7.")) {
			r.Status = StatusWarn
		}
		if rank(r.Status) > rank(worst) {
			worst = r.Status
		}
		on := rt + " on " + runtimeNodes(nodes[rt])
		if r.Status == StatusPass {
			passes = append(passes, on)
			continue
		}
		lines = append(lines, on+": "+r.Message)
	}
	if worst == StatusPass {
		return pass(strings.Join(passes, ", "))
	}
	msg := strings.Join(lines, "\n")
	if worst == StatusFail {
		return fail(msg, runtimeHint(env.Bundle.Version, runtimes))
	}
	return warn(msg, "gpuctl goes ahead; the NVIDIA container toolkit configures this runtime on GPU nodes, so watch the toolkit pods' logs if operands fail to start")
}

// runtimeCounts are the container runtime versions of the GPU nodes, each with its count of GPU
// nodes; before any GPU node is known, those of the worker pools, each with 0.
func runtimeCounts(d *detect.Result) map[string]int {
	nodes := map[string]int{}
	for _, n := range d.GPUNodes {
		if n.Runtime != "" {
			nodes[n.Runtime]++
		}
	}
	if len(d.GPUNodes) == 0 {
		for _, p := range d.Pools {
			if !p.ControlPlane {
				for _, rt := range p.Runtimes {
					nodes[rt] = 0
				}
			}
		}
	}
	return nodes
}

// runtimeNodes says which nodes run a runtime: n GPU nodes, or the worker nodes (n is 0).
func runtimeNodes(n int) string {
	switch n {
	case 0:
		return "worker nodes"
	case 1:
		return "1 GPU node"
	default:
		return fmt.Sprintf("%d GPU nodes", n)
	}
}

// rank orders statuses by severity.
func rank(s Status) int {
	switch s {
	case StatusFail:
		return 3
	case StatusWarn:
		return 2
	case StatusPass:
		return 1
	}
	return 0
}

// runtimeHint is what to do about a GPU node's runtime the release does not support.
func runtimeHint(version string, runtimes []string) string {
	if slices.ContainsFunc(runtimes, beforeCDI) {
		// CDI, on by default since v25.10 (cdi.enabled), needs containerd 1.7 or newer
		// (canonical/k8s-snap#2388); every release of gpuctl's catalog is tested from 1.7 on.
		return "CDI, which the operator uses by default since v25.10, needs containerd 1.7 or newer (canonical/k8s-snap#2388), and no GPU Operator release gpuctl installs was tested on an older one: upgrade containerd on the GPU nodes"
	}
	return "upgrade the container runtime on the GPU nodes to a version GPU Operator " + version + " supports, or install an older GPU Operator release"
}

// beforeCDI: a containerd runtime ("containerd://1.6.28") older than 1.7, which cannot run CDI devices.
func beforeCDI(runtime string) bool {
	v, ok := strings.CutPrefix(runtime, "containerd://")
	if !ok {
		return false
	}
	major, rest, _ := strings.Cut(v, ".")
	minor, _, _ := strings.Cut(rest, ".")
	return major == "0" || major == "1" && len(minor) == 1 && minor < "7"
}
