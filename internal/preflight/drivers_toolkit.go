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
	"github.com/gpuctl/gpuctl/internal/distro"
)

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
	name := env.Detection.Distribution.Name
	d := distro.Get(name)
	known := d.Containerd != nil
	socket, config := tk.env["CONTAINERD_SOCKET"], tk.env["CONTAINERD_CONFIG"]
	var f findings
	if tk.nri && (rt.lowMajor < 2 || rt.lowMajor == 2 && rt.lowMinor < 1) {
		f.fail("cdi.nriPluginEnabled=true needs containerd 2.1 or later, but the GPU nodes run "+rt.running,
			"set cdi.nriPluginEnabled=false, or upgrade containerd (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/platform-support.html)")
	}
	if known {
		f.againstLayout(tk, d, rt)
	} else {
		f.againstOtherLayouts(socket, name)
	}
	sort.Strings(f.fails)
	settings := fmt.Sprintf("socket %s, config %s", cmp.Or(socket, distro.DefaultContainerdSocket), cmp.Or(config, distro.DefaultContainerdConfig))
	switch {
	case len(f.fails) > 0:
		return fail(strings.Join(append(f.fails, f.warns...), "\n"), strings.Join(f.hints, "; "))
	case len(f.warns) > 0:
		return warn(strings.Join(f.warns, "\n"), strings.Join(f.hints, "; "))
	case !known:
		return pass(fmt.Sprintf("%s (%s); gpuctl knows no other paths for %s", settings, rt.running, name))
	}
	return pass(fmt.Sprintf("%s, as %s's containerd needs (%s)", settings, d.Short, rt.running))
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
// distribution d.
func (f *findings) againstLayout(tk toolkitSettings, d distro.Distribution, rt nodeRuntimes) {
	layout, name := d.Containerd, d.Short
	socket, config, source := tk.env["CONTAINERD_SOCKET"], tk.env["CONTAINERD_CONFIG"], tk.env["RUNTIME_CONFIG_SOURCE"]
	effSocket := cmp.Or(socket, distro.DefaultContainerdSocket)
	switch {
	case runPath(effSocket) == runPath(layout.Socket):
	case layout.Usual:
		f.warn(fmt.Sprintf("toolkit.env CONTAINERD_SOCKET is %s, but containerd usually listens on %s on %s: make sure the GPU nodes' containerd listens there", effSocket, layout.Socket, name),
			fmt.Sprintf("the node's CRI socket is in the kubelet's --container-runtime-endpoint (%s)", layout.Source))
	default:
		f.fail(fmt.Sprintf("toolkit.env CONTAINERD_SOCKET is %s, but %s's containerd listens on %s: the toolkit cannot configure the nvidia runtime", effSocket, name, layout.Socket),
			fmt.Sprintf("set toolkit.env CONTAINERD_SOCKET=%s (%s), or leave toolkit.env to the %s profile", layout.Socket, layout.Source, d.Profile))
	}
	switch {
	case layout.Config != "" && config != layout.Config:
		f.fail(fmt.Sprintf("toolkit.env CONTAINERD_CONFIG is %s, but %s's containerd reads its settings from %s", cmp.Or(config, distro.DefaultContainerdConfig+" (NVIDIA's default)"), name, layout.Config),
			fmt.Sprintf("set toolkit.env CONTAINERD_CONFIG=%s (%s)", layout.Config, layout.Source))
	case layout.Managed != "" && strings.HasPrefix(config, layout.Managed):
		f.warn(fmt.Sprintf("toolkit.env CONTAINERD_CONFIG is %s, a file %s writes itself: the toolkit's edit is lost when %s restarts, or breaks its containerd after a reboot", config, name, name),
			fmt.Sprintf("drop CONTAINERD_CONFIG from toolkit.env and set only CONTAINERD_SOCKET (%s)", layout.Source))
	}
	if layout.FileSourceSince > 0 && rt.lowMajor >= layout.FileSourceSince && !strings.HasPrefix(source, "file") {
		f.warn(fmt.Sprintf("toolkit.env RUNTIME_CONFIG_SOURCE is %s: on %s with %s, `containerd config dump` gives the toolkit a config it must not write back", cmp.Or(source, "unset (command, then file)"), name, rt.running),
			fmt.Sprintf("set toolkit.env RUNTIME_CONFIG_SOURCE=file (%s)", layout.Source))
	}
	if layout.CDISince > 0 && tk.cdi && rt.lowMajor < layout.CDISince {
		f.warn(fmt.Sprintf("cdi.enabled=true, but %s's CDI support wants containerd %d.0 and the GPU nodes run %s", name, layout.CDISince, rt.running),
			fmt.Sprintf("upgrade %s to a release with containerd %d (%s)", name, layout.CDISince, layout.CDISource))
	}
}

// againstOtherLayouts: on a distribution gpuctl knows no paths for, a socket that is another
// distribution's says the detection or the profile may be wrong.
func (f *findings) againstOtherLayouts(socket, name string) {
	all := distro.All()
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	for _, d := range all {
		l := d.Containerd
		if l != nil && socket != "" && l.Socket != distro.DefaultContainerdSocket && runPath(socket) == runPath(l.Socket) {
			f.warn(fmt.Sprintf("toolkit.env CONTAINERD_SOCKET is %s, %s's socket, but the cluster looks like %s", socket, d.Short, name),
				"check the detected distribution (gpuctl detect) and the profile; choose one with --profile "+d.Profile)
		}
	}
}
