package dra

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin/standintest"
)

func TestSliceHasOneDevicePerGPUWithNVIDIAsAttributes(t *testing.T) {
	for _, tc := range []struct {
		name                          string
		gpus                          int
		product                       string
		wantProduct, wantArch, wantCC string
		wantMemory                    string
	}{
		{"one L4", 1, standin.GPUL4, "NVIDIA L4", "Ada Lovelace", "8.9.0", "23034Mi"},
		{"two A100 SXM4 40GB", 2, standin.GPUA100SXM40, "NVIDIA A100-SXM4-40GB", "Ampere", "8.0.0", "40Gi"},
		{"eight H100 80GB HBM3", 8, standin.GPUH100SXM80, "NVIDIA H100 80GB HBM3", "Hopper", "9.0.0", "81559Mi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := standintest.Node("gpu-0", "5.15.0", nil)
			node.UID = types.UID("node-uid-0")
			sl := Slice(node, standin.Hardware{GPUs: tc.gpus, GPUProduct: tc.product})
			if sl.Spec.Driver != "gpu.nvidia.com" || sl.Spec.Pool.Name != "gpu-0" || sl.Spec.NodeName == nil || *sl.Spec.NodeName != "gpu-0" {
				t.Errorf("driver %q pool %q nodeName %v, want gpu.nvidia.com, the node's pool and name", sl.Spec.Driver, sl.Spec.Pool.Name, sl.Spec.NodeName)
			}
			if sl.Spec.Pool.ResourceSliceCount != 1 || sl.Spec.Pool.Generation < 1 {
				t.Errorf("pool %+v, want one slice in a published generation", sl.Spec.Pool)
			}
			if o := sl.OwnerReferences; len(o) != 1 || o[0].Kind != "Node" || o[0].APIVersion != "v1" || o[0].Name != "gpu-0" || o[0].UID != "node-uid-0" || o[0].Controller == nil || !*o[0].Controller {
				t.Errorf("owner references %+v, want the Node as controller", o)
			}
			if !strings.HasPrefix(sl.Name, "00000-gpu.nvidia.com-gpu-0-") {
				t.Errorf("name %q does not follow the kubelet-plugin helper's <index>-<driver>-<node>- scheme", sl.Name)
			}
			if len(sl.Spec.Devices) != tc.gpus {
				t.Fatalf("%d devices, want %d", len(sl.Spec.Devices), tc.gpus)
			}
			uuids := map[string]bool{}
			for i, d := range sl.Spec.Devices {
				if want := fmt.Sprintf("gpu-%d", i); d.Name != want {
					t.Errorf("device %d is named %q, want %q", i, d.Name, want)
				}
				str := func(k resourceapi.QualifiedName) string {
					if a, ok := d.Attributes[k]; ok && a.StringValue != nil {
						return *a.StringValue
					}
					return "<missing>"
				}
				ver := func(k resourceapi.QualifiedName) string {
					if a, ok := d.Attributes[k]; ok && a.VersionValue != nil {
						return *a.VersionValue
					}
					return "<missing>"
				}
				if str("type") != "gpu" || str("productName") != tc.wantProduct || str("architecture") != tc.wantArch || str("brand") != "Nvidia" {
					t.Errorf("%s: type %q product %q architecture %q brand %q", d.Name, str("type"), str("productName"), str("architecture"), str("brand"))
				}
				if ver("cudaComputeCapability") != tc.wantCC || ver("driverVersion") != "595.91.7" || ver("cudaDriverVersion") != "13.2.0" {
					t.Errorf("%s: versions cc %q driver %q cuda %q", d.Name, ver("cudaComputeCapability"), ver("driverVersion"), ver("cudaDriverVersion"))
				}
				u := str("uuid")
				if !strings.HasPrefix(u, "GPU-") || len(u) != len("GPU-")+36 || uuids[u] {
					t.Errorf("%s: uuid %q is not a fresh NVML-style UUID", d.Name, u)
				}
				uuids[u] = true
				if !strings.HasPrefix(str("resource.kubernetes.io/pciBusID"), "0000:") {
					t.Errorf("%s: pciBusID %q", d.Name, str("resource.kubernetes.io/pciBusID"))
				}
				m, ok := d.Capacity["memory"]
				if !ok || m.Value.String() != tc.wantMemory {
					t.Errorf("%s: memory capacity %v, want %s", d.Name, m.Value.String(), tc.wantMemory)
				}
			}
			again := Slice(node, standin.Hardware{GPUs: tc.gpus, GPUProduct: tc.product})
			if again.Name != sl.Name || *again.Spec.Devices[0].Attributes["uuid"].StringValue != *sl.Spec.Devices[0].Attributes["uuid"].StringValue {
				t.Error("the same node's slice differs between two builds")
			}
		})
	}
}

func TestGPUKubeletPluginPodRecognition(t *testing.T) {
	operator := standintest.Pod("gpu-operator", "nvidia-dra-driver-kubelet-plugin-x7k2p", "gpu-0", true, corev1.Container{
		Name: "gpus", Image: "nvcr.io/nvidia/dra-driver-nvidia-gpu:v0.5.0", Command: []string{"bash", "-c"},
		Args: []string{"set -a\nsource /run/nvidia/validations/driver-ready\nset +a\nexec gpu-kubelet-plugin -v \"${LOG_VERBOSITY}\""},
	})
	operator.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "nvidia-dra-driver-kubelet-plugin"}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"the GPU operator's GPUCluster DaemonSet pod publishes", operator, true},
		{"the driver chart's kubelet plugin with the gpus container publishes", standintest.Pod("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu-kubelet-plugin-abcde", "gpu-0", true,
			corev1.Container{Name: "compute-domains", Image: "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.0", Command: []string{"bash", "-c"}, Args: []string{"compute-domain-kubelet-plugin -v $(LOG_VERBOSITY)"}},
			corev1.Container{Name: "gpus", Image: "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.0", Command: []string{"bash", "-c"}, Args: []string{"if true; then :; fi\ngpu-kubelet-plugin -v $(LOG_VERBOSITY)"}},
		), true},
		{"the plugin run directly by path publishes", standintest.Pod("dra", "plugin", "gpu-0", true,
			corev1.Container{Name: "plugin", Image: "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.0", Command: []string{"/usr/bin/gpu-kubelet-plugin"}}), true},
		{"the chart with only compute domains does not", standintest.Pod("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu-kubelet-plugin-fghij", "gpu-0", true,
			corev1.Container{Name: "compute-domains", Image: "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.0", Command: []string{"bash", "-c"}, Args: []string{"compute-domain-kubelet-plugin -v $(LOG_VERBOSITY)"}}), false},
		{"the compute-domain controller from the same image does not", standintest.Pod("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu-controller-1", "cpu-0", true,
			corev1.Container{Name: "compute-domain", Image: "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.0", Command: []string{"compute-domain-controller", "-v", "4"}}), false},
		{"the device plugin does not", standintest.Pod("gpu-operator", "nvidia-device-plugin-daemonset-abcde", "gpu-0", true,
			corev1.Container{Name: "nvidia-device-plugin", Image: "nvcr.io/nvidia/k8s-device-plugin:v0.20.0", Command: []string{"nvidia-device-plugin"}}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsGPUKubeletPluginPod(tc.pod); got != tc.want {
				t.Errorf("IsGPUKubeletPluginPod = %v, want %v", got, tc.want)
			}
		})
	}
}

// describeSlices describes the gpu.nvidia.com slices of node: "none", or "<devices> devices" per slice.
func describeSlices(ctx context.Context, cs *fake.Clientset, node string) (string, error) {
	list, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	var out []string
	for _, sl := range list.Items {
		if sl.Spec.Driver == Driver && sl.Spec.NodeName != nil && *sl.Spec.NodeName == node {
			out = append(out, fmt.Sprintf("%d devices", len(sl.Spec.Devices)))
		}
	}
	if len(out) == 0 {
		return "none", nil
	}
	slices.Sort(out)
	return strings.Join(out, ", "), nil
}

func TestStandInPublishesWhileThePluginRunsAndCleansUp(t *testing.T) {
	other := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-0-other-driver"},
		Spec: resourceapi.ResourceSliceSpec{Driver: "dra.example.com", NodeName: ptr.To("gpu-0"),
			Pool: resourceapi.ResourcePool{Name: "gpu-0", ResourceSliceCount: 1}},
	}
	cs := fake.NewClientset(standintest.Node("gpu-0", "5.15.0", nil), standintest.Node("cpu-0", "5.15.0", nil), other)
	ctx := context.Background()
	hw := map[string]standin.Hardware{"gpu-0": {GPUs: 2, GPUProduct: standin.GPUL4}, "cpu-0": {}}
	plugin := func(name, node string, ready bool) *corev1.Pod {
		p := standintest.Pod("gpu-operator", name, node, ready, corev1.Container{Name: "gpus", Image: "nvcr.io/nvidia/dra-driver-nvidia-gpu:v0.5.0",
			Command: []string{"bash", "-c"}, Args: []string{"exec gpu-kubelet-plugin -v 4"}})
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "nvidia-dra-driver-kubelet-plugin"}}
		return p
	}
	pod := standintest.CreateTyped(t, cs.CoreV1().Pods("gpu-operator").Create, plugin("plugin-gpu", "gpu-0", false))
	standintest.CreateTyped(t, cs.CoreV1().Pods("gpu-operator").Create, plugin("plugin-cpu", "cpu-0", true))
	standintest.Start(t, func(ctx context.Context, logf func(string, ...any)) error {
		return Run(ctx, cs, hw, logf)
	})
	expect := func(node, want string) func(ctx context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			got, err := describeSlices(ctx, cs, node)
			if err != nil || got == want {
				return "", err
			}
			return fmt.Sprintf("%s: slices %s, want %s", node, got, want), nil
		}
	}
	otherKept := func(ctx context.Context) (string, error) {
		_, err := cs.ResourceV1().ResourceSlices().Get(ctx, "gpu-0-other-driver", metav1.GetOptions{})
		return "", err
	}
	standintest.ConsistentlyOK(t, "nothing while the plugin is not ready", 300*time.Millisecond, expect("gpu-0", "none"))

	pod.Status.Conditions[0].Status = corev1.ConditionTrue
	if _, err := cs.CoreV1().Pods("gpu-operator").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	standintest.EventuallyOK(t, "gpu-0 publishes its 2 GPUs", expect("gpu-0", "2 devices"))
	standintest.ConsistentlyOK(t, "a node without GPUs publishes nothing", 200*time.Millisecond, expect("cpu-0", "none"))

	list, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range list.Items {
		if sl.Spec.Driver != Driver {
			continue
		}
		if err := cs.ResourceV1().ResourceSlices().Delete(ctx, sl.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	standintest.EventuallyOK(t, "a deleted slice is published again", expect("gpu-0", "2 devices"))

	if err := cs.CoreV1().Pods("gpu-operator").Delete(ctx, "plugin-gpu", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	standintest.EventuallyOK(t, "with the plugin gone its slice goes", expect("gpu-0", "none"))
	standintest.EventuallyOK(t, "another driver's slice on the node stays", otherKept)
}
