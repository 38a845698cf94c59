package preflight

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/gpuctl/gpuctl/internal/detect"
)

// listNames shows at most five names, then a count.
func listNames(names []string) string {
	if len(names) <= 5 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:5], ", "), len(names)-5)
}

// quantity is n and the phrase that fits it: one when n is 1, else many ("1 node carries", "3 nodes carry").
func quantity(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// checkGPUNodes: detection found GPU nodes. Before NFD has run, a node may show no sign of its GPU
// (no capacity, no PCI label, no cloud accelerator label), so none found is a warning: gpuctl
// installs NFD and waits for it.
func checkGPUNodes(_ context.Context, env *Env) Result {
	if r, ok := needDetection(env); !ok {
		return r
	}
	d := env.Detection
	if len(d.GPUNodes) == 0 {
		return warn(fmt.Sprintf("none of the %s shows an NVIDIA GPU yet", quantity(d.Nodes.Total, "node", "nodes")),
			"if the GPU nodes have joined, NFD will label them once it runs and gpuctl waits for that; otherwise add the GPU nodes first (kubectl get nodes)")
	}
	var names []string
	for _, n := range d.GPUNodes {
		names = append(names, n.Name)
	}
	return pass(quantity(len(names), "GPU node", "GPU nodes") + ": " + listNames(names))
}

// checkHostDriver: GPU drivers come either from the hosts or from the driver container, not a mix
// nobody chose. The driver container cannot replace a driver already loaded on the host
// (NVIDIA/gpu-operator#126, #381, #2150); the plan turns the driver off only when every GPU node has one.
func checkHostDriver(_ context.Context, env *Env) Result {
	if r, ok := needDetection(env); !ok {
		return r
	}
	if r, ok := needPlan(env); !ok {
		return r
	}
	d := env.Detection
	var with []string
	reasons := map[string]bool{}
	for _, n := range d.GPUNodes {
		if n.HostDriver != "" {
			with = append(with, n.Name)
			reasons[n.HostDriver] = true
		}
	}
	driverOn := enabled(operatorValues(env.Plan), "driver")
	total := len(d.GPUNodes)
	switch {
	case len(with) == 0 && !driverOn:
		return pass("driver.enabled=false: the hosts are to provide the driver")
	case len(with) == 0:
		return pass("no GPU node shows a host driver; the driver container installs it")
	case len(with) == total && !driverOn:
		return pass("every GPU node has a host driver; driver.enabled=false")
	case len(with) == total:
		return warn(fmt.Sprintf("every GPU node has a host driver (%s), but driver.enabled=true: the driver container cannot replace a loaded host driver", firstReason(reasons)),
			"drop the value that sets driver.enabled=true, so the operator uses the host drivers")
	case !driverOn:
		return warn(fmt.Sprintf("driver.enabled=false, but only %d of %d GPU nodes show a host driver (%s); the others need one before their GPUs work", len(with), total, listNames(with)),
			"install the driver on every GPU node, or let the operator install it (driver.enabled=true) on nodes without one")
	default:
		return warn(fmt.Sprintf("%d of %d GPU nodes have a host driver (%s: %s); the driver container runs on the others", len(with), total, listNames(with), firstReason(reasons)),
			"mixing host and containerized drivers is fragile: give every GPU node a host driver and set driver.enabled=false, or recreate those nodes without one")
	}
}

func firstReason(reasons map[string]bool) string {
	var rs []string
	for r := range reasons {
		rs = append(rs, r)
	}
	sort.Strings(rs)
	return rs[0]
}

// driverlessOS are the node OSes NVIDIA's driver container does not support: the driver must come
// from the host or the platform (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html,
// https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/amazon-eks.html,
// https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/platform-support.html; detect's pool notes).
var driverlessOS = map[string]struct{ name, hint string }{
	"cos":          {"Container-Optimized OS", "on GKE use the gke profile: Google's driver installer provides the driver and driver.enabled=false"},
	"amzn":         {"Amazon Linux", "EKS Amazon Linux GPU AMIs ship the driver and toolkit (set driver.enabled=false and toolkit.enabled=false), or use Ubuntu EKS AMIs for the full operator"},
	"bottlerocket": {"Bottlerocket", "Bottlerocket's NVIDIA variants ship the driver and toolkit: set driver.enabled=false and toolkit.enabled=false"},
	"flatcar":      {"Flatcar", "install the driver on the hosts and set driver.enabled=false, or use Ubuntu or RHEL GPU nodes"},
}

// checkDriverOS: with driver.enabled=true, no GPU node runs an OS the driver container cannot serve.
// Before GPU nodes are known every worker pool is looked at, and a match is only a warning.
func checkDriverOS(_ context.Context, env *Env) Result {
	if r, ok := needDetection(env); !ok {
		return r
	}
	if r, ok := needPlan(env); !ok {
		return r
	}
	d := env.Detection
	driverOn := enabled(operatorValues(env.Plan), "driver")
	pools := map[string]detect.Pool{}
	for _, p := range d.Pools {
		pools[p.Name] = p
	}
	byOS := map[string][]string{}
	if len(d.GPUNodes) > 0 {
		for _, n := range d.GPUNodes {
			if _, bad := driverlessOS[pools[n.Pool].OS]; bad {
				byOS[pools[n.Pool].OS] = append(byOS[pools[n.Pool].OS], n.Name)
			}
		}
	} else {
		for _, p := range d.Pools {
			if _, bad := driverlessOS[p.OS]; bad && !p.ControlPlane {
				byOS[p.OS] = append(byOS[p.OS], p.Nodes...)
			}
		}
	}
	if len(byOS) == 0 {
		return pass("no GPU node runs an OS the driver container cannot serve")
	}
	oses := make([]string, 0, len(byOS))
	for os := range byOS {
		oses = append(oses, os)
	}
	sort.Strings(oses)
	var lines, hints []string
	for _, os := range oses {
		lines = append(lines, fmt.Sprintf("%s on %s", driverlessOS[os].name, listNames(byOS[os])))
		hints = append(hints, driverlessOS[os].hint)
	}
	if !driverOn {
		return pass("driver.enabled=false: the host provides the driver on " + strings.Join(lines, "; "))
	}
	msg := "driver.enabled=true, but NVIDIA's driver container does not support " + strings.Join(lines, "; ")
	if len(d.GPUNodes) == 0 {
		return warn(msg+" (if these become GPU nodes)", strings.Join(hints, "; "))
	}
	return fail(msg, strings.Join(hints, "; "))
}
