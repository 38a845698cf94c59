package health

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The operator's driver upgrade controller moves each GPU node through the states of the label
// nvidia.com/gpu-driver-upgrade-state (NVIDIA/gpu-operator controllers/upgrade_controller.go@v26.7.0;
// the states are NVIDIA/k8s-operator-libs pkg/upgrade/consts.go as vendored by that release):
// upgrade-required, cordon-required, wait-for-jobs-required, pod-deletion-required, drain-required,
// node-maintenance-required, post-maintenance-required, pod-restart-required, validation-required,
// uncordon-required, then upgrade-done, or upgrade-failed.
const (
	DriverUpgradeStateLabel = "nvidia.com/gpu-driver-upgrade-state"
	DriverUpgradeDone       = "upgrade-done"
	DriverUpgradeFailed     = "upgrade-failed"
)

// DriverUpgradeSettled reports whether a node's driver upgrade has ended: no state (no driver the
// operator manages, or no upgrade), upgrade-done or upgrade-failed.
func DriverUpgradeSettled(state string) bool {
	return state == "" || state == DriverUpgradeDone || state == DriverUpgradeFailed
}

// DriverUpgradesSettled waits until the driver upgrade state of every named node has settled
// (DriverUpgradeSettled), and returns each node's final state. Progress reads "1/2 GPU nodes'
// driver upgrades settled", with the nodes still upgrading as Pending.
func (w *Waiter) DriverUpgradesSettled(ctx context.Context, nodes []string) (map[string]string, error) {
	names := SortedUniqueNames(nodes)
	states := map[string]string{}
	if len(names) == 0 {
		return states, nil
	}
	src := w.nodeSource(names, "", DriverUpgradeStateLabel)
	err := w.until(ctx, waitSpec{
		what:            "driver upgrades on " + nodesPhrase(names),
		sources:         []*source{src},
		pendingAreNodes: true,
		eval: func(time.Time) verdict {
			cached := cachedNodes(src)
			for _, n := range names {
				if node := cached[n]; node != nil {
					states[n] = node.Labels[DriverUpgradeStateLabel]
				}
			}
			return countNodes(names, cached, func(n *corev1.Node) bool {
				return DriverUpgradeSettled(n.Labels[DriverUpgradeStateLabel])
			}, "GPU nodes' driver upgrades settled")
		},
	})
	return states, err
}
