package kubeletdm

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// FieldManager is the field manager of the node status writes: the kubelet's, which the API server
// takes from its user agent ("kubelet/v1.37.2 …").
const FieldManager = "kubelet"

// statusRetry is how long the writer waits after a failed write before it tries again.
const statusRetry = time.Second

// counts are one resource's capacity and allocatable.
type counts struct{ capacity, allocatable int }

// capacities is what devicemanager's GetCapacity and the node status setter make of the resources
// (manager.go and pkg/kubelet/nodestatus/setters.go@v1.37.2): capacity counts every device,
// allocatable the healthy ones; a resource whose plugin stayed gone past the grace period has both 0.
func (m *Manager) capacities() map[string]counts {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]counts, len(m.resources))
	for name, r := range m.resources {
		out[name] = counts{capacity: r.healthy.Len() + r.unhealthy.Len(), allocatable: r.healthy.Len()}
	}
	return out
}

// writeStatus writes the node's device resources whenever they change, until ctx is done. A failed
// write is retried; writes that would change nothing are not sent.
func (m *Manager) writeStatus(ctx context.Context) {
	var written map[string]counts
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.statusDirty:
		}
		want := m.capacities()
		if maps.Equal(want, written) {
			continue
		}
		if err := m.patchStatus(ctx, want); err != nil {
			if !failing && ctx.Err() == nil {
				m.logf("write node status: %v (retrying)", err)
			}
			failing = true
			select {
			case <-ctx.Done():
				return
			case <-time.After(statusRetry):
			}
			signal(m.statusDirty)
			continue
		}
		if failing {
			m.logf("node status written")
		}
		written, failing = want, false
	}
}

// patchStatus sets the resources' keys of status.capacity and status.allocatable, and no others,
// with a strategic-merge patch of the status subresource as the kubelet's PatchNodeStatus
// (k8s.io/component-helpers node/util/status.go@v0.37.2).
func (m *Manager) patchStatus(ctx context.Context, want map[string]counts) error {
	capacity, allocatable := map[string]string{}, map[string]string{}
	for name, c := range want {
		capacity[name] = fmt.Sprint(c.capacity)
		allocatable[name] = fmt.Sprint(c.allocatable)
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"capacity": capacity, "allocatable": allocatable}})
	if err != nil {
		return err
	}
	_, err = m.Client.CoreV1().Nodes().Patch(ctx, m.Node, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager}, "status")
	return err
}
