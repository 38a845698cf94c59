package preflight

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/internal/detect"
)

// NVIDIA's defaults for the toolkit's containerd settings, used when toolkit.env does not set them
// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html).
const (
	defaultContainerdSocket = "/run/containerd/containerd.sock"
	defaultContainerdConfig = "/etc/containerd/config.toml"
)

// containerdLayout is where a distribution's containerd listens and keeps its config, as the toolkit
// must be told (profiles/<distribution>.yaml set these values).
type containerdLayout struct {
	name string
	// socket is where its containerd listens (CONTAINERD_SOCKET).
	socket string
	// config is the file the toolkit must edit (CONTAINERD_CONFIG); "" leaves NVIDIA's default alone.
	config string
	// managed is a directory whose files the distribution writes itself: CONTAINERD_CONFIG must not
	// point into it.
	managed string
	// fileSourceSince is the containerd major version from which RUNTIME_CONFIG_SOURCE must read the
	// file (`containerd config dump` runs the wrong containerd or returns a config the toolkit cannot
	// round-trip); 0: no such need.
	fileSourceSince int
	// source is where the layout is documented.
	source string
	// usual: the paths are the usual ones, not fixed by the distribution (kubeadm and GKE nodes may run
	// containerd elsewhere), so a different setting is a warning, not a failure.
	usual bool
}

// containerdLayouts by distribution (detect's names). Distributions not listed keep NVIDIA's defaults
// or run no toolkit (the EKS and AKS profiles turn it off; OpenShift's runs CRI-O).
var containerdLayouts = map[string]containerdLayout{
	// RKE2 writes config.toml itself; the toolkit writing its template breaks RKE2 after a reboot.
	detect.RKE2: {name: "RKE2", socket: "/run/k3s/containerd/containerd.sock", managed: "/var/lib/rancher/rke2/agent/etc/containerd/",
		source: "https://docs.rke2.io/add-ons/gpu_operators; NVIDIA/gpu-operator#992"},
	// K3s runs the same containerd fork as RKE2; pointing the toolkit at its template can drop the
	// flannel CNI config.
	detect.K3s: {name: "K3s", socket: "/run/k3s/containerd/containerd.sock", managed: "/var/lib/rancher/k3s/agent/etc/containerd/",
		source: "https://docs.rke2.io/add-ons/gpu_operators; NVIDIA/gpu-operator#473"},
	// The snap's containerd regenerates containerd.toml from the template on restart.
	detect.MicroK8s: {name: "MicroK8s", socket: "/var/snap/microk8s/common/run/containerd.sock", config: "/var/snap/microk8s/current/args/containerd-template.toml",
		fileSourceSince: 1, source: "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html"},
	// k0s merges files of containerd.d into the containerd.toml it generates; its statically linked
	// containerd is not the one `containerd config dump` runs.
	detect.K0s: {name: "k0s", socket: "/run/k0s/containerd.sock", config: "/etc/k0s/containerd.d/nvidia.toml",
		fileSourceSince: 1, source: "NVIDIA/gpu-operator#1323; k0sproject/k0s#6547"},
	// On containerd 2 (GKE 1.33+) `containerd config dump` made the toolkit drop GKE's CNI plugin.
	detect.GKE: {name: "GKE", socket: defaultContainerdSocket, fileSourceSince: 2, source: "NVIDIA/gpu-operator#1577", usual: true},
	detect.Kubeadm: {name: "kubeadm", socket: defaultContainerdSocket, usual: true,
		source: "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html"},
}

// containerdMajor parses status.nodeInfo.containerRuntimeVersion ("containerd://2.1.4") into the
// major and minor version; ok is false for another runtime.
func containerdMajor(runtime string) (major, minor int, ok bool) {
	v, found := strings.CutPrefix(runtime, "containerd://")
	if !found {
		return 0, 0, false
	}
	v = strings.TrimPrefix(v, "v")
	parts := strings.SplitN(v, ".", 3)
	major, err := strconv.Atoi(parts[0])
	if err != nil {
		return 0, 0, false
	}
	if len(parts) > 1 {
		minor, _ = strconv.Atoi(parts[1])
	}
	return major, minor, true
}

// toolkitSettings are the ClusterPolicy's toolkit and CDI settings the check reads.
type toolkitSettings struct {
	enabled, cdi, nri bool
	env               map[string]string
}

func toolkitOf(objs []*unstructured.Unstructured) (toolkitSettings, bool) {
	for _, u := range objs {
		if u.GetKind() != "ClusterPolicy" {
			continue
		}
		t, _, _ := unstructured.NestedMap(u.Object, "spec", "toolkit")
		s := toolkitSettings{enabled: t["enabled"] != false, env: map[string]string{}}
		s.cdi, _, _ = unstructured.NestedBool(u.Object, "spec", "cdi", "enabled")
		s.nri, _, _ = unstructured.NestedBool(u.Object, "spec", "cdi", "nriPluginEnabled")
		if env, ok := t["env"].([]any); ok {
			for _, e := range env {
				if m, ok := e.(map[string]any); ok {
					name, _ := m["name"].(string)
					s.env[name] = fmt.Sprint(m["value"])
				}
			}
		}
		return s, true
	}
	return toolkitSettings{}, false
}

// runPath treats /var/run as /run, a symlink on every distribution the layouts name.
func runPath(p string) string {
	if rest, ok := strings.CutPrefix(p, "/var/run/"); ok {
		return "/run/" + rest
	}
	return p
}

// checkToolkitContainerd: the toolkit container is told where the distribution's containerd listens
// and which config file it may edit, and how to read the current config, for the containerd version
// the GPU nodes run. A wrong socket or file leaves the nvidia runtime unconfigured ("no runtime for
// nvidia is configured", NVIDIA/gpu-operator#406, #473), or breaks the distribution's containerd on
// its next restart (#992).
func checkToolkitContainerd(_ context.Context, env *Env) Result {
	if r, ok := needDetection(env); !ok {
		return r
	}
	if r, ok := needPlan(env); !ok {
		return r
	}
	tk, ok := toolkitOf(env.Objects)
	switch {
	case !ok:
		return skip("the install writes no ClusterPolicy")
	case !tk.enabled:
		return skip("toolkit.enabled=false: the hosts' container runtime is set up without the toolkit")
	}
	nodes, _ := driverCandidates(env.Detection)
	rt, some := nodesContainerd(nodes)
	if !some {
		return skip("no GPU node (or, before NFD has run, worker) runs containerd")
	}
	distro := env.Detection.Distribution.Name
	layout, known := containerdLayouts[distro]
	socket, config := tk.env["CONTAINERD_SOCKET"], tk.env["CONTAINERD_CONFIG"]
	var f findings
	if tk.nri && (rt.lowMajor < 2 || rt.lowMajor == 2 && rt.lowMinor < 1) {
		f.fail("cdi.nriPluginEnabled=true needs containerd 2.1 or later, but the GPU nodes run "+rt.running,
			"set cdi.nriPluginEnabled=false, or upgrade containerd (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/platform-support.html)")
	}
	if known {
		f.againstLayout(tk, layout, distro, rt)
	} else {
		f.againstOtherLayouts(socket, distro)
	}
	sort.Strings(f.fails)
	settings := fmt.Sprintf("socket %s, config %s", cmp.Or(socket, defaultContainerdSocket), cmp.Or(config, defaultContainerdConfig))
	switch {
	case len(f.fails) > 0:
		return fail(strings.Join(append(f.fails, f.warns...), "\n"), strings.Join(f.hints, "; "))
	case len(f.warns) > 0:
		return warn(strings.Join(f.warns, "\n"), strings.Join(f.hints, "; "))
	case !known:
		return pass(fmt.Sprintf("%s (%s); gpuctl knows no other paths for %s", settings, rt.running, distro))
	}
	return pass(fmt.Sprintf("%s, as %s's containerd needs (%s)", settings, layout.name, rt.running))
}

// nodeRuntimes is what the GPU nodes' containerd is: each version with its nodes, as one phrase, and
// the lowest version.
type nodeRuntimes struct {
	running            string
	lowMajor, lowMinor int
}

// nodesContainerd reads the containerd versions of nodes; false when none runs containerd.
func nodesContainerd(nodes []detect.GPUNode) (nodeRuntimes, bool) {
	var rt nodeRuntimes
	versions := map[string][]string{}
	some := false
	for _, n := range nodes {
		major, minor, isContainerd := containerdMajor(n.Runtime)
		if !isContainerd {
			continue
		}
		v := strings.TrimPrefix(n.Runtime, "containerd://")
		versions[v] = append(versions[v], n.Name)
		if !some || major < rt.lowMajor || major == rt.lowMajor && minor < rt.lowMinor {
			rt.lowMajor, rt.lowMinor, some = major, minor, true
		}
	}
	var vs []string
	for _, v := range sortedKeys(versions) {
		vs = append(vs, fmt.Sprintf("containerd %s on %s", v, listNames(versions[v])))
	}
	rt.running = strings.Join(vs, "; ")
	return rt, some
}

// findings are a check's failures and warnings, with a hint for each.
type findings struct{ fails, warns, hints []string }

func (f *findings) fail(msg, hint string) {
	f.fails, f.hints = append(f.fails, msg), append(f.hints, hint)
}
func (f *findings) warn(msg, hint string) {
	f.warns, f.hints = append(f.warns, msg), append(f.hints, hint)
}

// againstLayout judges the toolkit's settings against the containerd layout of the detected
// distribution.
func (f *findings) againstLayout(tk toolkitSettings, layout containerdLayout, distro string, rt nodeRuntimes) {
	socket, config, source := tk.env["CONTAINERD_SOCKET"], tk.env["CONTAINERD_CONFIG"], tk.env["RUNTIME_CONFIG_SOURCE"]
	effSocket := cmp.Or(socket, defaultContainerdSocket)
	switch {
	case runPath(effSocket) == runPath(layout.socket):
	case layout.usual:
		f.warn(fmt.Sprintf("toolkit.env CONTAINERD_SOCKET is %s, but containerd usually listens on %s on %s: make sure the GPU nodes' containerd listens there", effSocket, layout.socket, layout.name),
			fmt.Sprintf("the node's CRI socket is in the kubelet's --container-runtime-endpoint (%s)", layout.source))
	default:
		f.fail(fmt.Sprintf("toolkit.env CONTAINERD_SOCKET is %s, but %s's containerd listens on %s: the toolkit cannot configure the nvidia runtime", effSocket, layout.name, layout.socket),
			fmt.Sprintf("set toolkit.env CONTAINERD_SOCKET=%s (%s), or leave toolkit.env to the %s profile", layout.socket, layout.source, distro))
	}
	switch {
	case layout.config != "" && config != layout.config:
		f.fail(fmt.Sprintf("toolkit.env CONTAINERD_CONFIG is %s, but %s's containerd reads its settings from %s", cmp.Or(config, defaultContainerdConfig+" (NVIDIA's default)"), layout.name, layout.config),
			fmt.Sprintf("set toolkit.env CONTAINERD_CONFIG=%s (%s)", layout.config, layout.source))
	case layout.managed != "" && strings.HasPrefix(config, layout.managed):
		f.warn(fmt.Sprintf("toolkit.env CONTAINERD_CONFIG is %s, a file %s writes itself: the toolkit's edit is lost when %s restarts, or breaks its containerd after a reboot", config, layout.name, layout.name),
			fmt.Sprintf("drop CONTAINERD_CONFIG from toolkit.env and set only CONTAINERD_SOCKET (%s)", layout.source))
	}
	if layout.fileSourceSince > 0 && rt.lowMajor >= layout.fileSourceSince && !strings.HasPrefix(source, "file") {
		f.warn(fmt.Sprintf("toolkit.env RUNTIME_CONFIG_SOURCE is %s: on %s with %s, `containerd config dump` gives the toolkit a config it must not write back", cmp.Or(source, "unset (command, then file)"), layout.name, rt.running),
			fmt.Sprintf("set toolkit.env RUNTIME_CONFIG_SOURCE=file (%s)", layout.source))
	}
	if (distro == detect.RKE2 || distro == detect.K3s) && tk.cdi && rt.lowMajor < 2 {
		f.warn(fmt.Sprintf("cdi.enabled=true, but %s's CDI support wants containerd 2.0 and the GPU nodes run %s", layout.name, rt.running),
			"upgrade "+layout.name+" to a release with containerd 2 (https://docs.rke2.io/add-ons/gpu_operators)")
	}
}

// againstOtherLayouts: on a distribution gpuctl knows no paths for, a socket that is another
// distribution's says the detection or the profile may be wrong.
func (f *findings) againstOtherLayouts(socket, distro string) {
	for _, d := range sortedKeys(containerdLayouts) {
		l := containerdLayouts[d]
		if socket != "" && l.socket != defaultContainerdSocket && runPath(socket) == runPath(l.socket) {
			f.warn(fmt.Sprintf("toolkit.env CONTAINERD_SOCKET is %s, %s's socket, but the cluster looks like %s", socket, l.name, distro),
				"check the detected distribution (gpuctl detect) and the profile; choose one with --profile "+d)
		}
	}
}
