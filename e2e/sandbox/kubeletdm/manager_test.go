package kubeletdm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin/standintest"
)

const (
	testNode = "gpu-node-0"
	gpu      = "nvidia.com/gpu"
)

// startManager runs a Manager for testNode, whose status has kwok's default resources, in a fresh
// directory until the test ends.
func startManager(t *testing.T, grace time.Duration) (*Manager, *fake.Clientset) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}, Status: corev1.NodeStatus{
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1k")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1k")},
	}}
	cs := fake.NewClientset(node)
	m := &Manager{Client: cs, Node: testNode, Dir: t.TempDir(), Log: logWriter{t}, stopGrace: grace, dialTimeout: time.Second}
	standintest.Start(t, func(ctx context.Context, _ func(string, ...any)) error { return m.Run(ctx) })
	standintest.EventuallyOK(t, "kubelet.sock served", func(context.Context) (string, error) {
		if _, err := os.Stat(filepath.Join(m.Dir, KubeletSocketName)); err != nil {
			return err.Error(), nil
		}
		return "", nil
	})
	return m, cs
}

// wantNodeGPUs waits for the node's capacity and allocatable of res, and the resources it had before.
func wantNodeGPUs(t *testing.T, cs *fake.Clientset, res string, capacity, allocatable int64) {
	t.Helper()
	standintest.EventuallyOK(t, fmt.Sprintf("%s capacity %d, allocatable %d", res, capacity, allocatable), func(ctx context.Context) (string, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		c, a := n.Status.Capacity[corev1.ResourceName(res)], n.Status.Allocatable[corev1.ResourceName(res)]
		cpu := n.Status.Capacity[corev1.ResourceCPU]
		if c.Value() != capacity || a.Value() != allocatable || cpu.String() != "1k" {
			return fmt.Sprintf("capacity %v, allocatable %v", n.Status.Capacity, n.Status.Allocatable), nil
		}
		return "", nil
	})
}

// A plugin registers and lists 4 devices, one unhealthy: the node has 4, 3 of them allocatable,
// written as the kubelet writes its node status. When the plugin's stream ends, allocatable drops
// to 0 and capacity stays; the plugin registering again brings them back.
func TestNodeAdvertisesWhatThePluginLists(t *testing.T) {
	m, cs := startManager(t, time.Hour)
	p := startPlugin(t, m.Dir, "nvidia-gpu.sock", gpu, devices([]string{"GPU-0", "GPU-1", "GPU-2"}, "GPU-3"))
	if err := p.register(t, m.Dir, pluginapi.Version); err != nil {
		t.Fatal(err)
	}
	wantNodeGPUs(t, cs, gpu, 4, 3)
	checkStatusWrites(t, cs)

	p.updates <- devices([]string{"GPU-0"}, "GPU-1", "GPU-2", "GPU-3")
	wantNodeGPUs(t, cs, gpu, 4, 1)

	close(p.end)
	wantNodeGPUs(t, cs, gpu, 4, 0)

	p2 := startPlugin(t, m.Dir, "nvidia-gpu.sock", gpu, devices([]string{"GPU-0", "GPU-1", "GPU-2"}, "GPU-3"))
	if err := p2.register(t, m.Dir, pluginapi.Version); err != nil {
		t.Fatal(err)
	}
	wantNodeGPUs(t, cs, gpu, 4, 3)
}

// checkStatusWrites requires every write of the node to be a strategic-merge patch of its status
// under the kubelet's field manager.
func checkStatusWrites(t *testing.T, cs *fake.Clientset) {
	t.Helper()
	n := 0
	for _, a := range cs.Actions() {
		if a.GetResource().Resource != "nodes" || a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		n++
		p, ok := a.(k8stesting.PatchAction)
		if !ok || a.GetSubresource() != "status" || string(p.GetPatchType()) != "application/strategic-merge-patch+json" {
			t.Errorf("node written by %s %s, want a strategic-merge patch of status", a.GetVerb(), a.GetSubresource())
			continue
		}
		if pa, ok := a.(k8stesting.PatchActionImpl); !ok || pa.PatchOptions.FieldManager != FieldManager {
			t.Errorf("node status patched as %+v, want field manager %q", a, FieldManager)
		}
	}
	if n == 0 {
		t.Error("the node's status was never written")
	}
}

// A plugin that restarts registers again (NVIDIA's on a config change or SIGHUP) and replaces its
// old endpoint: the old stream's end no longer takes the resource away.
func TestReRegistrationReplacesTheEndpoint(t *testing.T) {
	m, cs := startManager(t, time.Hour)
	old := startPlugin(t, m.Dir, "old.sock", gpu, devices([]string{"GPU-0", "GPU-1"}))
	if err := old.register(t, m.Dir, pluginapi.Version); err != nil {
		t.Fatal(err)
	}
	wantNodeGPUs(t, cs, gpu, 2, 2)
	renamed := startPlugin(t, m.Dir, "new.sock", gpu, devices([]string{"GPU-0::0", "GPU-0::1", "GPU-1::0", "GPU-1::1"}))
	if err := renamed.register(t, m.Dir, pluginapi.Version); err != nil {
		t.Fatal(err)
	}
	wantNodeGPUs(t, cs, gpu, 4, 4)
	old.srv.Stop()
	standintest.ConsistentlyOK(t, "the replaced endpoint's end changes nothing", 300*time.Millisecond, func(ctx context.Context) (string, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if a := n.Status.Allocatable[gpu]; a.Value() != 4 {
			return fmt.Sprintf("allocatable %v", a.String()), nil
		}
		return "", nil
	})
}

// Once a stopped plugin stays gone for the grace period, its resource's capacity drops to 0 too.
func TestCapacityDropsAfterTheGracePeriod(t *testing.T) {
	m, cs := startManager(t, 200*time.Millisecond)
	p := startPlugin(t, m.Dir, "nvidia-gpu.sock", gpu, devices([]string{"GPU-0", "GPU-1"}))
	if err := p.register(t, m.Dir, pluginapi.Version); err != nil {
		t.Fatal(err)
	}
	wantNodeGPUs(t, cs, gpu, 2, 2)
	p.srv.Stop() // the plugin's process ends
	wantNodeGPUs(t, cs, gpu, 0, 0)
}

// The kubelet refuses a registration of another API version or of a name that is not an extended
// resource, and one whose endpoint does not answer.
func TestBadRegistrationsAreRefused(t *testing.T) {
	m, cs := startManager(t, time.Hour)
	for _, tc := range []struct{ resource, version, socket, want string }{
		{gpu, "v1alpha", "p.sock", `requested API version "v1alpha" is not supported`},
		{"gpu", pluginapi.Version, "p.sock", `the ResourceName "gpu" is invalid`},
		{"kubernetes.io/gpu", pluginapi.Version, "p.sock", "is invalid"},
		{gpu, pluginapi.Version, "", "failed to get device plugin options"},
	} {
		p := &fakePlugin{resource: tc.resource, socket: filepath.Join(m.Dir, "absent.sock")}
		if tc.socket != "" {
			p = startPlugin(t, m.Dir, tc.socket, tc.resource, nil)
		}
		err := p.register(t, m.Dir, tc.version)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("register %s %s at %q: %v, want %q", tc.resource, tc.version, tc.socket, err, tc.want)
		}
	}
	n, err := cs.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Status.Capacity) != 1 {
		t.Errorf("node capacity %v, want only its cpu", n.Status.Capacity)
	}
}

// A Manager that starts removes the sockets left in its directory, as the kubelet does; a Manager
// that stops removes kubelet.sock, and runs only once.
func TestSocketsAreCleanedUp(t *testing.T) {
	dir := t.TempDir()
	stale := startPlugin(t, dir, "stale.sock", gpu, nil)
	m := &Manager{Client: fake.NewClientset(), Node: testNode, Dir: dir}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	standintest.EventuallyOK(t, "stale socket removed, kubelet.sock served", func(context.Context) (string, error) {
		if _, err := os.Stat(stale.socket); err == nil {
			return "stale.sock is still there", nil
		}
		if _, err := os.Stat(filepath.Join(dir, KubeletSocketName)); err != nil {
			return err.Error(), nil
		}
		return "", nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, KubeletSocketName)); !os.IsNotExist(err) {
		t.Errorf("kubelet.sock after Run: %v", err)
	}
	if err := m.Run(context.Background()); err == nil {
		t.Error("a second Run succeeded")
	}
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
