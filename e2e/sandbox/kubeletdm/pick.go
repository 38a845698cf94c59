package kubeletdm

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// devicesToAllocate picks needed devices of res and reserves them, as devicemanager's
// devicesToAllocate does without topology alignment (manager.go@v1.37.2: filterByAffinity puts every
// device in "no affinity" when there is no NUMA hint): devices to reuse first, then the plugin's
// preferred ones where its options offer GetPreferredAllocation, then any healthy free device (the
// kubelet takes them in a set's order; here in sorted order, so tests can tell). The errors are the
// kubelet's.
func (m *Manager) devicesToAllocate(ctx context.Context, res string, needed int, reusable sets.Set[string]) ([]string, *endpoint, error) {
	m.mu.Lock()
	r := m.resources[res]
	if r == nil || r.ep == nil {
		m.mu.Unlock()
		return nil, nil, fmt.Errorf("cannot allocate unregistered device %s", res)
	}
	if r.healthy.Len() == 0 {
		m.mu.Unlock()
		return nil, nil, fmt.Errorf("no healthy devices present; cannot allocate unhealthy devices %s", res)
	}
	p := &picker{needed: needed, chosen: sets.New[string]()}
	if p.take(sets.List(reusable)) {
		m.mu.Unlock()
		return p.ids, r.ep, nil
	}
	available := r.healthy.Difference(r.allocated)
	if available.Len() < needed-len(p.ids) {
		m.mu.Unlock()
		return nil, nil, fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d", res, needed-len(p.ids), available.Len())
	}
	ep := r.ep
	m.mu.Unlock()

	var preferred []string
	if ep.opts.GetGetPreferredAllocationAvailable() {
		var err error
		if preferred, err = m.preferred(ctx, ep, available.Union(p.chosen), p.chosen, needed); err != nil {
			return nil, nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// The plugin may have reported, stopped or registered again in between.
	if r.ep == nil {
		return nil, nil, fmt.Errorf("cannot allocate unregistered device %s", res)
	}
	ep = r.ep
	available = r.healthy.Difference(r.allocated)
	if !p.take(filter(preferred, available)) && !p.take(sets.List(available)) {
		return nil, nil, fmt.Errorf("unexpectedly allocated less resources than required. Requested: %d, Got: %d", needed, len(p.ids))
	}
	r.allocated.Insert(p.ids...)
	return p.ids, ep, nil
}

// picker collects device IDs until it has needed of them.
type picker struct {
	needed int
	ids    []string
	chosen sets.Set[string]
}

// take adds the IDs not chosen yet, in order, and says whether it has enough.
func (p *picker) take(ids []string) bool {
	for _, id := range ids {
		if len(p.ids) == p.needed {
			break
		}
		if !p.chosen.Has(id) {
			p.chosen.Insert(id)
			p.ids = append(p.ids, id)
		}
	}
	return len(p.ids) == p.needed
}

// filter keeps the ids in the set, in their order.
func filter(ids []string, in sets.Set[string]) []string {
	var out []string
	for _, id := range ids {
		if in.Has(id) {
			out = append(out, id)
		}
	}
	return out
}

// preferred asks the plugin which devices it prefers (endpoint.go@v1.37.2, getPreferredAllocation).
func (m *Manager) preferred(ctx context.Context, ep *endpoint, available, mustInclude sets.Set[string], size int) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	resp, err := ep.api.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs:   sets.List(available),
			MustIncludeDeviceIDs: sets.List(mustInclude),
			AllocationSize:       int32(size),
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("device plugin GetPreferredAllocation rpc failed with err: %w", err)
	}
	if len(resp.ContainerResponses) == 0 {
		return nil, nil
	}
	return resp.ContainerResponses[0].DeviceIDs, nil
}
