package kubeletdm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin/standintest"
)

func gpuContainer(name string, n int64) corev1.Container {
	q := *resource.NewQuantity(n, resource.DecimalSI)
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{gpu: q}, Requests: corev1.ResourceList{gpu: q},
	}}
}

func createPod(t *testing.T, cs *fake.Clientset, name, node string, init []corev1.Container, containers ...corev1.Container) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: node, InitContainers: init, Containers: containers},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	return standintest.CreateTyped(t, cs.CoreV1().Pods("default").Create, pod)
}

// waitAnnotation waits for the pod's annotation key to be want.
func waitAnnotation(t *testing.T, cs *fake.Clientset, pod, key, want string) {
	t.Helper()
	standintest.EventuallyOK(t, fmt.Sprintf("pod %s %s=%s", pod, key, want), func(ctx context.Context) (string, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if got := p.Annotations[key]; got != want {
			return fmt.Sprintf("annotations %v", p.Annotations), nil
		}
		return "", nil
	})
}

// A pod bound to the node that asks for 2 GPUs gets 2 healthy ones, those the plugin prefers; the
// plugin's Allocate is called with them and its answer is on the pod and in Allocations. A second
// pod asking for more than is left waits, with the kubelet's error on it, until the first ends.
// Pods of other nodes are none of the Manager's business.
func TestPodGetsThePluginsDevices(t *testing.T) {
	m, cs := startManager(t, 0)
	p := startPlugin(t, m.Dir, "nvidia-gpu.sock", gpu, devices([]string{"GPU-a", "GPU-b", "GPU-c"}, "GPU-bad"), func(p *fakePlugin) {
		p.preferred = []string{"GPU-bad", "GPU-c", "GPU-a", "GPU-b"}
		p.preStart = true
	})
	if err := p.register(t, m.Dir, pluginapi.Version); err != nil {
		t.Fatal(err)
	}
	wantNodeGPUs(t, cs, gpu, 4, 3)

	createPod(t, cs, "elsewhere", "other-node", nil, gpuContainer("c", 1))
	first := createPod(t, cs, "first", testNode, nil, gpuContainer("cuda", 2))
	waitAnnotation(t, cs, "first", DevicesAnnotation(gpu), "GPU-c,GPU-a")
	waitAnnotation(t, cs, "first", EnvsAnnotation, `{"cuda":{"NVIDIA_VISIBLE_DEVICES":"[GPU-c GPU-a]"}}`)
	if got := p.allocated(); len(got) != 1 || !slices.Equal(got[0], []string{"GPU-c", "GPU-a"}) {
		t.Errorf("Allocate calls %v, want one for [GPU-c GPU-a]", got)
	}
	allocs := m.Allocations(first.UID)
	if len(allocs) != 1 || allocs[0].Container != "cuda" || allocs[0].Resource != gpu || allocs[0].Response.Envs["NVIDIA_VISIBLE_DEVICES"] != "[GPU-c GPU-a]" {
		t.Errorf("Allocations = %+v", allocs)
	}
	p.mu.Lock()
	preStarts := slices.Clone(p.preStarts)
	p.mu.Unlock()
	if len(preStarts) != 1 || !slices.Equal(preStarts[0], []string{"GPU-c", "GPU-a"}) {
		t.Errorf("PreStartContainer calls %v, want one for the same devices", preStarts)
	}

	second := createPod(t, cs, "second", testNode, nil, gpuContainer("cuda", 2))
	waitAnnotation(t, cs, "second", ErrorAnnotation, "container cuda: requested number of devices unavailable for nvidia.com/gpu. Requested: 2, Available: 1")
	if m.Allocations(second.UID) != nil {
		t.Error("the second pod has devices")
	}
	first.Status.Phase = corev1.PodSucceeded
	if _, err := cs.CoreV1().Pods("default").UpdateStatus(context.Background(), first, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAnnotation(t, cs, "second", DevicesAnnotation(gpu), "GPU-c,GPU-a")
	waitAnnotation(t, cs, "second", ErrorAnnotation, "")
	if m.Allocations(first.UID) != nil {
		t.Error("the ended pod still has devices")
	}
	for _, a := range p.allocated() {
		if slices.Contains(a, "GPU-bad") {
			t.Errorf("the unhealthy device was allocated: %v", a)
		}
	}
	other, err := cs.CoreV1().Pods("default").Get(context.Background(), "elsewhere", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(other.Annotations) != 0 {
		t.Errorf("the other node's pod has annotations %v", other.Annotations)
	}
}

// Init containers run one after another, so the devices of one that has ended serve the next ones;
// a sidecar (a restartable init container) keeps its own. So, as with the kubelet's devicesToReuse:
// setup gets GPU-0 and GPU-1, the sidecar reuses GPU-0, and main reuses GPU-1 and needs GPU-2.
// Without a preferred allocation free devices are taken in order.
func TestInitContainersDevicesAreReused(t *testing.T) {
	m, cs := startManager(t, 0)
	p := startPlugin(t, m.Dir, "nvidia-gpu.sock", gpu, devices([]string{"GPU-0", "GPU-1", "GPU-2"}))
	if err := p.register(t, m.Dir, pluginapi.Version); err != nil {
		t.Fatal(err)
	}
	wantNodeGPUs(t, cs, gpu, 3, 3)
	always := corev1.ContainerRestartPolicyAlways
	sidecar := gpuContainer("sidecar", 1)
	sidecar.RestartPolicy = &always
	pod := createPod(t, cs, "init", testNode, []corev1.Container{gpuContainer("setup", 2), sidecar}, gpuContainer("main", 2))
	waitAnnotation(t, cs, "init", DevicesAnnotation(gpu), "GPU-0,GPU-1,GPU-2")
	got := map[string][]string{}
	for _, a := range m.Allocations(pod.UID) {
		got[a.Container] = a.DeviceIDs
	}
	want := map[string][]string{"setup": {"GPU-0", "GPU-1"}, "sidecar": {"GPU-0"}, "main": {"GPU-1", "GPU-2"}}
	b, _ := json.Marshal(got)
	if w, _ := json.Marshal(want); string(b) != string(w) {
		t.Errorf("devices by container %s, want %s", b, w)
	}
}
