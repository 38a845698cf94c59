package engine

import (
	"fmt"
	"strings"

	"github.com/gpuctl/gpuctl/internal/health"
)

// The operator's driver upgrade controller (NVIDIA/k8s-operator-libs pkg/upgrade as vendored by
// NVIDIA/gpu-operator v26.7.0, with driver name "gpu"): a node labelled
// nvidia.com/gpu-driver-upgrade.skip=true is never upgraded (consts.go UpgradeSkipNodeLabelKeyFmt,
// upgrade_inplace.go ProcessUpgradeRequiredNodes), and a node leaves upgrade-failed by itself once its
// driver pod runs in sync with the driver DaemonSet (common_manager.go ProcessUpgradeFailedNodes). NVIDIA's
// guide: https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-driver-upgrades.html.
const (
	driverUpgradeSkipLabel = "nvidia.com/gpu-driver-upgrade.skip"
	driverUpgradeRequired  = "upgrade-required"
	driverUpgradesDoc      = "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-driver-upgrades.html"
)

// driverUpgradeCheck names the GPU nodes whose driver upgrade failed or cannot move on: upgrade-failed,
// and upgrade-required on a node marked to skip upgrades, which the controller never starts. Nodes
// waiting in upgrade-required while the controller works on others are a warning: they get their turn
// (driver.upgradePolicy.maxParallelUpgrades). With driver.upgradePolicy.autoUpgrade off, NVIDIA's
// controller removes the state labels instead (controllers/upgrade_controller.go@v26.7.0,
// removeNodeUpgradeStateLabels), so no node stays in upgrade-required for that reason.
func driverUpgradeCheck(nodes []NodeStatus, ns string) StatusCheck {
	c := StatusCheck{Name: "driver upgrades", State: CheckOK}
	var failed, stuck, waiting, moving []string
	var stuckWhy []string
	for _, n := range nodes {
		switch s := n.DriverUpgradeState; {
		case s == health.DriverUpgradeFailed:
			failed = append(failed, n.Name)
		case s == driverUpgradeRequired && n.DriverUpgradeSkip:
			stuck = append(stuck, n.Name)
			stuckWhy = append(stuckWhy, n.Name+" is labelled "+driverUpgradeSkipLabel+"=true: remove the label (kubectl label node "+n.Name+" "+driverUpgradeSkipLabel+"-)")
		case s == driverUpgradeRequired:
			waiting = append(waiting, n.Name)
		case !health.DriverUpgradeSettled(s):
			moving = append(moving, n.Name+" ("+s+")")
		}
	}
	var msgs, hints []string
	if len(failed) > 0 {
		msgs = append(msgs, "driver upgrade failed (upgrade-failed) on "+strings.Join(failed, ", "))
		hints = append(hints, fmt.Sprintf("find why the driver pod failed: kubectl -n %s logs -l app=%s --all-containers --prefix on those nodes; fix the cause, "+
			"then delete the node's driver pod (kubectl -n %s delete pod -l app=%s --field-selector spec.nodeName=NODE): once the new pod runs in sync, "+
			"NVIDIA's upgrade controller moves the node out of upgrade-failed (%s)", ns, driverApp, ns, driverApp, driverUpgradesDoc))
	}
	if len(stuck) > 0 {
		msgs = append(msgs, "driver upgrade stuck in upgrade-required on "+strings.Join(stuck, ", "))
		hints = append(hints, stuckWhy...)
	}
	switch {
	case len(msgs) > 0:
		c.State, c.Message, c.Hint = CheckFailed, strings.Join(msgs, "; "), strings.Join(hints, "; ")
	case len(waiting) > 0 || len(moving) > 0:
		c.State = CheckWarning
		c.Message = "driver upgrade in progress"
		if len(moving) > 0 {
			c.Message += " on " + strings.Join(moving, ", ")
		}
		if len(waiting) > 0 {
			c.Message += "; waiting (upgrade-required): " + strings.Join(waiting, ", ")
		}
		c.Hint = "kubectl get nodes -L " + health.DriverUpgradeStateLabel + "; gpuctl status --wait waits"
	default:
		c.Message = "no driver upgrade pending or failed"
	}
	return c
}
