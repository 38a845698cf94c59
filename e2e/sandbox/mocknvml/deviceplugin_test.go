package mocknvml_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml"
)

// pluginScript runs NVIDIA's device plugin in a mount namespace of its own, where its fixed socket
// directory (/var/lib/kubelet/device-plugins, k8s.io/kubelet's DevicePluginPath) is the test's: an
// empty --kubelet-socket skips registering with a kubelet (cmd/nvidia-device-plugin/main.go at v0.19.0).
const pluginScript = `set -e
mount -t tmpfs none /var/lib
mkdir -p /var/lib/kubelet/device-plugins
mount --bind "$SOCKET_DIR" /var/lib/kubelet/device-plugins
exec "$PLUGIN" --kubelet-socket= --fail-on-init-error=true`

// TestDevicePlugin starts NVIDIA's own device plugin v0.19.0 on the library and asks it, as the
// kubelet would, for its devices: one healthy nvidia.com/gpu per configured GPU, by UUID, and no
// health update while its health check waits on the library's event set.
func TestDevicePlugin(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a mount namespace")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	libDir := libraryDir(t, library(t))
	bin := nvidiaPrograms(t).Plugin
	cfg := newConfig(t, mocknvml.A100SXM440GB, 8)
	sockets := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, unshare, "-m", "sh", "-c", pluginScript)
	cmd.Env = append(writeConfig(t, cfg), "LD_LIBRARY_PATH="+libDir, "SOCKET_DIR="+sockets, "PLUGIN="+bin)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cancel()
		<-exited
		if t.Failed() {
			t.Logf("device plugin:\n%s", logs)
		}
	}()
	socket := filepath.Join(sockets, "nvidia-gpu.sock")
	waitForSocket(t, socket, exited)
	client, resp, stream := listAndWatch(ctx, t, socket)
	var ids []string
	for _, d := range resp.Devices {
		ids = append(ids, d.ID)
		if d.Health != pluginapi.Healthy {
			t.Errorf("device %s is %s", d.ID, d.Health)
		}
	}
	var want []string
	for _, g := range cfg.GPUs {
		want = append(want, g.UUID)
	}
	equalJSON(t, "nvidia.com/gpu devices", slices.Sorted(slices.Values(ids)), slices.Sorted(slices.Values(want)))
	allocate(ctx, t, client, want)
	noUpdate(t, stream, 7*time.Second)
	if strings.Contains(strings.ToLower(logs.String()), "unhealthy") {
		t.Error("the device plugin marked a device unhealthy")
	}
}

func waitForSocket(t *testing.T, socket string, exited <-chan error) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		if _, err := os.Stat(socket); err == nil {
			return
		}
		select {
		case err := <-exited:
			t.Fatalf("the device plugin exited before serving %s: %v", socket, err)
		case <-deadline:
			t.Fatalf("the device plugin did not serve %s in a minute", socket)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// listAndWatch opens the kubelet's ListAndWatch stream and returns its first answer.
func listAndWatch(ctx context.Context, t *testing.T, socket string) (pluginapi.DevicePluginClient, *pluginapi.ListAndWatchResponse, pluginapi.DevicePlugin_ListAndWatchClient) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := pluginapi.NewDevicePluginClient(conn)
	stream, err := client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return client, resp, stream
}

// allocate asks as the kubelet does when a pod wants two GPUs: the plugin's preferred pair (its
// topology-aware allocator reads NVML too) and their allocation, which names them by UUID in
// NVIDIA_VISIBLE_DEVICES (the default envvar device list strategy).
func allocate(ctx context.Context, t *testing.T, client pluginapi.DevicePluginClient, uuids []string) {
	t.Helper()
	pref, err := client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{AvailableDeviceIDs: uuids, AllocationSize: 2}},
	})
	if err != nil {
		t.Fatalf("GetPreferredAllocation: %v", err)
	}
	chosen := pref.ContainerResponses[0].DeviceIDs
	if len(chosen) != 2 {
		t.Fatalf("preferred allocation %v, want two of %v", chosen, uuids)
	}
	alloc, err := client.Allocate(ctx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: chosen}},
	})
	if err != nil {
		t.Fatalf("Allocate: %v", err)
	}
	visible := alloc.ContainerResponses[0].Envs["NVIDIA_VISIBLE_DEVICES"]
	if got := strings.Split(visible, ","); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(chosen))) {
		t.Errorf("NVIDIA_VISIBLE_DEVICES=%s, want %v", visible, chosen)
	}
}

// noUpdate fails if the plugin sends another device list within d (it does when a device turns
// unhealthy: internal/plugin/server.go, ListAndWatch, at v0.19.0). Its health check waits 5 s on the
// event set per round (internal/rm/health.go), so d covers at least one timed-out wait.
func noUpdate(t *testing.T, stream pluginapi.DevicePlugin_ListAndWatchClient, d time.Duration) {
	t.Helper()
	got := make(chan *pluginapi.ListAndWatchResponse, 1)
	go func() {
		if resp, err := stream.Recv(); err == nil {
			got <- resp
		}
	}()
	select {
	case resp := <-got:
		t.Errorf("the device plugin updated its devices: %v", resp.Devices)
	case <-time.After(d):
	}
}

// syncBuffer is a bytes.Buffer for a process's output and the test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
