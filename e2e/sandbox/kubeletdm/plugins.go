package kubeletdm

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// dialTimeout bounds connecting to a plugin's endpoint and asking its options, as the kubelet's
// dial does (pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go@v1.37.2).
const dialTimeout = 10 * time.Second

// resourceState is what the Manager knows of one resource name: its current endpoint and devices, as
// devicemanager's endpoints, healthyDevices, unhealthyDevices and allocatedDevices.
type resourceState struct {
	ep                 *endpoint // nil once the stop grace period expired
	stopped            bool
	healthy, unhealthy sets.Set[string]
	allocated          sets.Set[string]
	graceTimer         *time.Timer
}

// endpoint is one registered plugin's connection.
type endpoint struct {
	resource, socket string
	conn             *grpc.ClientConn
	api              pluginapi.DevicePluginClient
	opts             *pluginapi.DevicePluginOptions
}

// registration serves the v1beta1 Registration service for a Manager.
type registration struct {
	pluginapi.UnimplementedRegistrationServer
	m *Manager
}

// Register validates the request as the kubelet's registration server does
// (pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go@v1.37.2, Register), then connects to the
// plugin: it dials the endpoint in Dir and asks its options before it answers (PluginConnected), and
// reads ListAndWatch in the background.
func (r registration) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	m := r.m
	if !slices.Contains(pluginapi.SupportedVersions[:], req.Version) {
		err := fmt.Errorf("requested API version %q is not supported by kubelet. Supported version is %q", req.Version, pluginapi.SupportedVersions)
		m.logf("bad registration of %s: %v", req.ResourceName, err)
		return &pluginapi.Empty{}, err
	}
	if !isExtendedResourceName(req.ResourceName) {
		err := fmt.Errorf("the ResourceName %q is invalid", req.ResourceName)
		m.logf("bad registration: %v", err)
		return &pluginapi.Empty{}, err
	}
	ep, err := m.connect(ctx, req.ResourceName, filepath.Join(m.Dir, req.Endpoint))
	if err != nil {
		m.logf("registration of %s at %s failed: %v", req.ResourceName, req.Endpoint, err)
		return &pluginapi.Empty{}, err
	}
	m.replaceEndpoint(ep)
	m.wg.Add(1)
	go func() { defer m.wg.Done(); m.listAndWatch(ep) }()
	return &pluginapi.Empty{}, nil
}

// isExtendedResourceName is v1helper.IsExtendedResourceName (k8s.io/kubernetes
// pkg/apis/core/v1/helper/helpers.go@v1.37.2): a domain-prefixed name outside kubernetes.io, not
// starting with "requests.", that is a qualified name once prefixed with "requests.".
func isExtendedResourceName(name string) bool {
	native := !strings.Contains(name, "/") || strings.Contains(name, corev1.ResourceDefaultNamespacePrefix)
	if native || strings.HasPrefix(name, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+name)) == 0
}

// connect dials the plugin and asks its options, within the dial timeout.
func (m *Manager) connect(ctx context.Context, resourceName, socket string) (*endpoint, error) {
	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithAuthority("localhost"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("failed to dial device plugin: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, m.dialTimeout)
	defer cancel()
	api := pluginapi.NewDevicePluginClient(conn)
	opts, err := api.GetDevicePluginOptions(ctx, &pluginapi.Empty{}, grpc.WaitForReady(true))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("failed to get device plugin options: %w", err)
	}
	return &endpoint{resource: resourceName, socket: socket, conn: conn, api: api, opts: opts}, nil
}

// replaceEndpoint makes ep its resource's endpoint. An older endpoint of the resource is closed: its
// stream ends, and its end no longer concerns the resource.
func (m *Manager) replaceEndpoint(ep *endpoint) {
	m.mu.Lock()
	r := m.resources[ep.resource]
	if r == nil {
		r = &resourceState{healthy: sets.New[string](), unhealthy: sets.New[string](), allocated: sets.New[string]()}
		m.resources[ep.resource] = r
	}
	old := r.ep
	r.ep, r.stopped = ep, false
	if r.graceTimer != nil {
		r.graceTimer.Stop()
		r.graceTimer = nil
	}
	m.mu.Unlock()
	if old != nil {
		old.conn.Close()
	}
	m.logf("device plugin for %s registered at %s (preferred allocation: %t)", ep.resource, ep.socket, ep.opts.GetGetPreferredAllocationAvailable())
}

// listAndWatch reads the plugin's device lists until the stream ends, as the kubelet's plugin client
// does (client.go@v1.37.2, Run), then disconnects the endpoint.
func (m *Manager) listAndWatch(ep *endpoint) {
	stream, err := ep.api.ListAndWatch(m.runCtx, &pluginapi.Empty{})
	for err == nil {
		var resp *pluginapi.ListAndWatchResponse
		if resp, err = stream.Recv(); err == nil {
			m.updateDevices(ep, resp.Devices)
		}
	}
	m.logf("ListAndWatch of %s ended: %v", ep.resource, err)
	m.disconnect(ep)
}

// updateDevices replaces the resource's devices with the plugin's list, sorted by health
// (genericDeviceUpdateCallback, manager.go@v1.37.2).
func (m *Manager) updateDevices(ep *endpoint, devices []*pluginapi.Device) {
	m.mu.Lock()
	r := m.resources[ep.resource]
	if r == nil || r.ep != ep {
		m.mu.Unlock()
		return
	}
	r.healthy, r.unhealthy = sets.New[string](), sets.New[string]()
	for _, d := range devices {
		if d.Health == pluginapi.Healthy {
			r.healthy.Insert(d.ID)
		} else {
			r.unhealthy.Insert(d.ID)
		}
	}
	healthy := r.healthy.Len()
	m.mu.Unlock()
	m.logf("%s: %d devices, %d healthy", ep.resource, len(devices), healthy)
	signal(m.statusDirty)
	signal(m.retryPods)
}

// disconnect closes ep. If it is still its resource's endpoint, the resource's devices become
// unhealthy and the stop grace period starts (PluginDisconnected and markResourceUnhealthy,
// manager.go@v1.37.2): allocatable drops to 0 at once, capacity when the period expires.
func (m *Manager) disconnect(ep *endpoint) {
	ep.conn.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.resources[ep.resource]
	if r == nil || r.ep != ep || r.stopped {
		return
	}
	r.stopped = true
	r.unhealthy = r.unhealthy.Union(r.healthy)
	r.healthy = sets.New[string]()
	if m.runCtx.Err() == nil { // not when the Manager stops
		r.graceTimer = time.AfterFunc(m.stopGrace, func() { m.expire(ep) })
	}
	signal(m.statusDirty)
}

// expire forgets a resource whose endpoint stayed stopped for the grace period, as GetCapacity does;
// the node status then sets its capacity to 0 (pkg/kubelet/nodestatus/setters.go@v1.37.2,
// removedDevicePlugins).
func (m *Manager) expire(ep *endpoint) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.resources[ep.resource]
	if r == nil || r.ep != ep || !r.stopped {
		return
	}
	r.ep, r.graceTimer = nil, nil
	r.healthy, r.unhealthy = sets.New[string](), sets.New[string]()
	m.logf("%s: device plugin gone for %s, capacity 0", ep.resource, m.stopGrace)
	signal(m.statusDirty)
}

// disconnectAll closes every endpoint when the Manager stops; the streams' readers then end.
func (m *Manager) disconnectAll() {
	m.mu.Lock()
	var eps []*endpoint
	for _, r := range m.resources {
		if r.graceTimer != nil {
			r.graceTimer.Stop()
		}
		if r.ep != nil {
			eps = append(eps, r.ep)
		}
	}
	m.mu.Unlock()
	for _, ep := range eps {
		ep.conn.Close()
	}
}
