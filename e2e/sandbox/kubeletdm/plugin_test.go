package kubeletdm

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// fakePlugin is a device plugin of the test's own, serving v1beta1's DevicePlugin service on a unix
// socket in the Manager's directory, as NVIDIA's does (internal/plugin/server.go@v0.19.0).
type fakePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	resource, socket string
	// preferred is the order the plugin prefers devices in, if it offers GetPreferredAllocation.
	preferred []string
	preStart  bool

	srv     *grpc.Server
	updates chan []*pluginapi.Device
	end     chan struct{}

	mu        sync.Mutex
	devices   []*pluginapi.Device
	allocates [][]string // the device IDs of each Allocate container request
	preStarts [][]string
}

func devices(healthy []string, unhealthy ...string) []*pluginapi.Device {
	var out []*pluginapi.Device
	for _, id := range healthy {
		out = append(out, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
	}
	for _, id := range unhealthy {
		out = append(out, &pluginapi.Device{ID: id, Health: pluginapi.Unhealthy})
	}
	return out
}

// startPlugin serves a plugin for resource at dir/name with devs until the test ends; options set
// its other fields before it serves.
func startPlugin(t *testing.T, dir, name, resource string, devs []*pluginapi.Device, options ...func(*fakePlugin)) *fakePlugin {
	t.Helper()
	p := &fakePlugin{
		resource: resource, socket: filepath.Join(dir, name), devices: devs,
		updates: make(chan []*pluginapi.Device), end: make(chan struct{}),
	}
	for _, o := range options {
		o(p)
	}
	os.Remove(p.socket)
	ln, err := net.Listen("unix", p.socket)
	if err != nil {
		t.Fatal(err)
	}
	p.srv = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.srv, p)
	go p.srv.Serve(ln)
	t.Cleanup(p.srv.Stop)
	return p
}

// register registers the plugin with the Manager's kubelet.sock, as NVIDIA's plugin's Register does.
func (p *fakePlugin) register(t *testing.T, dir, version string) error {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, KubeletSocketName), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: version, Endpoint: filepath.Base(p.socket), ResourceName: p.resource,
		Options: &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: p.preferred != nil},
	}, grpc.WaitForReady(true))
	return err
}

func (p *fakePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: p.preferred != nil, PreStartRequired: p.preStart}, nil
}

// ListAndWatch sends the devices, then each update, until the test ends the stream.
func (p *fakePlugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	p.mu.Lock()
	devs := p.devices
	p.mu.Unlock()
	for {
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return err
		}
		select {
		case devs = <-p.updates:
		case <-p.end:
			return nil
		case <-s.Context().Done():
			return nil
		}
	}
}

// GetPreferredAllocation answers with the available devices in the plugin's preferred order, the
// ones it must include first.
func (p *fakePlugin) GetPreferredAllocation(_ context.Context, r *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, req := range r.ContainerRequests {
		ids := slices.Clone(req.MustIncludeDeviceIDs)
		for _, id := range p.preferred {
			if len(ids) < int(req.AllocationSize) && slices.Contains(req.AvailableDeviceIDs, id) && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// Allocate answers like NVIDIA's plugin with its default envvar strategy: NVIDIA_VISIBLE_DEVICES.
func (p *fakePlugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, req := range r.ContainerRequests {
		p.allocates = append(p.allocates, req.DevicesIds)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": fmt.Sprint(req.DevicesIds)},
		})
	}
	return resp, nil
}

func (p *fakePlugin) PreStartContainer(_ context.Context, r *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.preStarts = append(p.preStarts, r.DevicesIds)
	return &pluginapi.PreStartContainerResponse{}, nil
}

func (p *fakePlugin) allocated() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.allocates)
}
