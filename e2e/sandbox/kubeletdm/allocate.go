package kubeletdm

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// rpcTimeout bounds each Allocate and GetPreferredAllocation call, so that a hung plugin does not
// hold up the node's other pods for ever. PreStartContainer has the kubelet's own bound.
const rpcTimeout = 30 * time.Second

// Allocation is a plugin's answer for one container and resource.
type Allocation struct {
	Container string
	Resource  string
	// DeviceIDs are the devices the Manager picked and asked the plugin to allocate, in the order asked.
	DeviceIDs []string
	// Response is the plugin's ContainerAllocateResponse (envs, mounts, device specs, annotations,
	// CDI devices); read-only.
	Response *pluginapi.ContainerAllocateResponse
}

// allocatePod allocates the devices of every container that needs some, init containers first, and
// lets app containers reuse what non-restartable init containers had, as devicemanager's Allocate
// does with devicesToReuse (manager.go@v1.37.2). On failure nothing stays reserved for the pod.
func (m *Manager) allocatePod(ctx context.Context, pod *corev1.Pod) ([]Allocation, error) {
	reuse := map[string]sets.Set[string]{}
	taken := map[string]sets.Set[string]{}
	var out []Allocation
	containers := slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers)
	for i := range containers {
		c := &containers[i]
		allocs, err := m.allocateContainer(ctx, c, reuse, taken)
		if err != nil {
			m.unreserve(taken)
			return nil, fmt.Errorf("container %s: %w", c.Name, err)
		}
		isInit := i < len(pod.Spec.InitContainers)
		for _, a := range allocs {
			if reuse[a.Resource] == nil {
				reuse[a.Resource] = sets.New[string]()
			}
			if isInit && !isRestartable(c) {
				reuse[a.Resource].Insert(a.DeviceIDs...)
			} else {
				reuse[a.Resource].Delete(a.DeviceIDs...)
			}
		}
		out = append(out, allocs...)
	}
	return out, nil
}

// isRestartable is a sidecar: an init container that keeps running, and keeps its devices.
func isRestartable(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// allocateContainer allocates, for each device-plugin resource in the container's limits (the
// kubelet reads limits, which extended resources require equal to requests), the devices and asks the
// plugin's Allocate for them (allocateContainerResources, manager.go@v1.37.2).
func (m *Manager) allocateContainer(ctx context.Context, c *corev1.Container, reuse, taken map[string]sets.Set[string]) ([]Allocation, error) {
	var out []Allocation
	for _, name := range slices.Sorted(func(yield func(corev1.ResourceName) bool) {
		for k := range c.Resources.Limits {
			if !yield(k) {
				return
			}
		}
	}) {
		res := string(name)
		q := c.Resources.Limits[name]
		if !m.isDevicePluginResource(res) || q.Value() == 0 {
			continue
		}
		ids, ep, err := m.devicesToAllocate(ctx, res, int(q.Value()), reuse[res])
		if taken[res] == nil {
			taken[res] = sets.New[string]()
		}
		taken[res].Insert(ids...)
		if err != nil {
			return nil, err
		}
		resp, err := m.callAllocate(ctx, ep, ids)
		if err != nil {
			return nil, err
		}
		out = append(out, Allocation{Container: c.Name, Resource: res, DeviceIDs: ids, Response: resp})
	}
	return out, nil
}

// isDevicePluginResource: a resource some plugin registered (devicemanager's healthyDevices or
// allocatedDevices has it).
func (m *Manager) isDevicePluginResource(res string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.resources[res]
	return ok
}

// callAllocate asks the plugin to allocate ids for one container, and PreStartContainer where the
// plugin's options require it (endpoint.go@v1.37.2, allocate and preStartContainer).
func (m *Manager) callAllocate(ctx context.Context, ep *endpoint, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
	actx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	resp, err := ep.api.Allocate(actx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}},
	})
	if err != nil {
		return nil, fmt.Errorf("allocate %s %v: %w", ep.resource, ids, err)
	}
	if len(resp.ContainerResponses) == 0 {
		return nil, fmt.Errorf("no containers return in allocation response %v", resp)
	}
	if ep.opts.GetPreStartRequired() {
		pctx, cancel := context.WithTimeout(ctx, pluginapi.KubeletPreStartContainerRPCTimeoutInSecs*time.Second)
		defer cancel()
		if _, err := ep.api.PreStartContainer(pctx, &pluginapi.PreStartContainerRequest{DevicesIds: ids}); err != nil {
			return nil, fmt.Errorf("device plugin PreStartContainer rpc failed with err: %w", err)
		}
	}
	return resp.ContainerResponses[0], nil
}

// unreserve frees devices a failed allocation had reserved.
func (m *Manager) unreserve(taken map[string]sets.Set[string]) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for res, ids := range taken {
		if r := m.resources[res]; r != nil {
			r.allocated = r.allocated.Difference(ids)
		}
	}
}
