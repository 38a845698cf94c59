package engine

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// GPU feature discovery's labels of what the device plugin runs on a node: the sharing strategy (none,
// time-slicing, mps), the replicas per GPU, and the MIG strategy (none, single, mixed)
// (NVIDIA/k8s-device-plugin docs/gpu-feature-discovery/README.md@v0.20.0, "Generated Labels").
const (
	gfdSharingLabel     = "nvidia.com/gpu.sharing-strategy"
	gfdReplicasLabel    = "nvidia.com/gpu.replicas"
	gfdMIGStrategyLabel = "nvidia.com/mig.strategy"
	// migManagerApp is the app label of MIG manager's pods
	// (NVIDIA/gpu-operator assets/state-mig-manager/0600_daemonset.yaml@v26.7.0).
	migManagerApp = "nvidia-mig-manager"
	// MIG manager's states in nvidia.com/mig.config.state besides pending and rebooting
	// (NVIDIA/mig-parted deployments/gpu-operator/reconfigure-mig.sh@v0.15.0).
	migStateSuccess = "success"
	migStateFailed  = "failed"
	migDoc          = "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-mig.html"
)

// PoolStatus is one GPU node pool (as detection names it) as its nodes report it. A value the pool's
// nodes disagree on (a change under way) lists each value, comma-separated; "" is not reported.
type PoolStatus struct {
	Name  string   `json:"name"`
	Nodes []string `json:"nodes"`
	// DevicePluginConfig is the nodes' nvidia.com/device-plugin.config label: the device-plugin config
	// they run ("": the ClusterPolicy's default).
	DevicePluginConfig string `json:"devicePluginConfig,omitempty"`
	// Sharing and Replicas are GPU feature discovery's nvidia.com/gpu.sharing-strategy and
	// nvidia.com/gpu.replicas; Replicas is 0 when the nodes disagree or do not report it.
	Sharing  string `json:"sharing,omitempty"`
	Replicas int    `json:"replicas,omitempty"`
	// MIGStrategy is GPU feature discovery's nvidia.com/mig.strategy; MIGConfig and MIGConfigState are
	// nvidia.com/mig.config (the mig-parted config) and MIG manager's nvidia.com/mig.config.state.
	MIGStrategy    string `json:"migStrategy,omitempty"`
	MIGConfig      string `json:"migConfig,omitempty"`
	MIGConfigState string `json:"migConfigState,omitempty"`
	// DRA stack only: DRADriver is "READY/NODES Ready" for the DRA driver's kubelet plugins, and
	// ResourceSlices and Devices the pool's total of what they publish.
	DRADriver      string `json:"draDriver,omitempty"`
	ResourceSlices int    `json:"resourceSlices,omitempty"`
	Devices        int    `json:"devices,omitempty"`
	// Advertised is the pool's total allocatable nvidia.com/gpu and nvidia.com/mig-* resources, as the
	// nodes advertise them (nil: none does).
	Advertised map[string]int64 `json:"advertised,omitempty"`
}

// poolRows summarises the GPU node rows by pool, sorted by name, and names each row's pool. nodes are
// all the cluster's nodes: detection names pools from all of them, as install and --sharing did.
func poolRows(nodes []corev1.Node, rows []NodeStatus, dra bool) []PoolStatus {
	if len(rows) == 0 {
		return nil
	}
	poolOf := map[string]string{}
	for _, p := range detect.Analyze(&detect.Snapshot{Nodes: nodes}).Pools {
		for _, n := range p.Nodes {
			poolOf[n] = p.Name
		}
	}
	byName := map[string]*corev1.Node{}
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	members := map[string][]int{}
	for i := range rows {
		rows[i].Pool = poolOf[rows[i].Name]
		members[rows[i].Pool] = append(members[rows[i].Pool], i)
	}
	var out []PoolStatus
	for _, name := range slices.Sorted(maps.Keys(members)) {
		p := PoolStatus{Name: name}
		var config, sharing, replicas, strategy, migConfig, migState []string
		ready := 0
		for _, i := range members[name] {
			r, n := rows[i], byName[rows[i].Name]
			p.Nodes = append(p.Nodes, r.Name)
			config = append(config, n.Labels[plan.SharingLabel])
			sharing = append(sharing, n.Labels[gfdSharingLabel])
			replicas = append(replicas, n.Labels[gfdReplicasLabel])
			strategy = append(strategy, n.Labels[gfdMIGStrategyLabel])
			migConfig = append(migConfig, r.MIGConfig)
			migState = append(migState, r.MIGConfigState)
			if r.DRADriver == "Ready" {
				ready++
			}
			p.ResourceSlices += r.ResourceSlices
			p.Devices += r.Devices
			for res, q := range n.Status.Allocatable {
				if res == detect.GPUResource || strings.HasPrefix(string(res), "nvidia.com/mig-") {
					if p.Advertised == nil {
						p.Advertised = map[string]int64{}
					}
					p.Advertised[string(res)] += q.Value()
				}
			}
		}
		p.DevicePluginConfig, p.Sharing, p.MIGStrategy = each(config), each(sharing), each(strategy)
		p.MIGConfig, p.MIGConfigState = each(migConfig), each(migState)
		if !strings.Contains(each(replicas), ",") {
			p.Replicas, _ = strconv.Atoi(each(replicas))
		}
		if dra {
			p.DRADriver = fmt.Sprintf("%d/%d Ready", ready, len(p.Nodes))
		}
		out = append(out, p)
	}
	return out
}

// each is the distinct non-empty values, sorted and comma-separated: one value when the nodes agree.
func each(values []string) string {
	var set []string
	for _, v := range values {
		if v != "" && !slices.Contains(set, v) {
			set = append(set, v)
		}
	}
	slices.Sort(set)
	return strings.Join(set, ", ")
}

// hasMIGState is true when a GPU node reports MIG manager's nvidia.com/mig.config.state: MIG manager
// runs there, so migCheck has something to judge.
func hasMIGState(rows []NodeStatus) bool {
	return slices.ContainsFunc(rows, func(n NodeStatus) bool { return n.MIGConfigState != "" })
}

// migCheck judges MIG manager's nvidia.com/mig.config.state on the GPU nodes that report one: failed
// fails the check (MIG manager gave up on the node's config; its logs say why, as NVIDIA's MIG guide
// tells), pending or rebooting is a warning (MIG manager is applying it), success is ok.
func migCheck(rows []NodeStatus, ns string) StatusCheck {
	c := StatusCheck{Name: "mig", State: CheckOK}
	var failed, moving []string
	reporting := 0
	for _, n := range rows {
		switch n.MIGConfigState {
		case "":
			continue
		case migStateSuccess:
		case migStateFailed:
			failed = append(failed, n.Name+" ("+cmp.Or(n.MIGConfig, "none")+")")
		default:
			moving = append(moving, n.MIGConfigState+" on "+n.Name)
		}
		reporting++
	}
	applied := reporting - len(failed) - len(moving)
	c.Message = fmt.Sprintf("%s applied on %d/%d GPU nodes", plan.MIGLabel, applied, reporting)
	switch {
	case len(failed) > 0:
		c.State = CheckFailed
		c.Message = plan.MIGStateLabel + "=failed on " + strings.Join(failed, ", ")
		if len(moving) > 0 {
			c.Message += "; " + strings.Join(moving, ", ")
		}
		c.Hint = fmt.Sprintf("MIG manager could not apply the config: kubectl -n %s logs -l app=%s --prefix shows why (%s); "+
			"then label the node a config its GPUs take (gpuctl upgrade --mig POOL=CONFIG), which MIG manager applies anew", ns, migManagerApp, migDoc)
	case len(moving) > 0:
		c.State = CheckWarning
		c.Message = "MIG config being applied: " + strings.Join(moving, ", ")
		c.Hint = "MIG manager is partitioning the GPUs (a cloud node reboots for it): kubectl get nodes -L " + plan.MIGLabel + "," + plan.MIGStateLabel
	}
	return c
}
