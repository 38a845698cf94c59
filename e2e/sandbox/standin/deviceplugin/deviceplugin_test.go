package deviceplugin

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin/standintest"
)

func TestNVIDIADevicePluginPodRecognition(t *testing.T) {
	owned := standintest.Pod("gpu-operator", "nvidia-device-plugin-daemonset-x7k2p", "gpu-0", true, corev1.Container{
		Name: "nvidia-device-plugin", Image: "nvcr.io/nvidia/k8s-device-plugin:v0.20.0", Command: []string{"/bin/bash", "-c"}, Args: []string{"/bin/entrypoint.sh"},
	})
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "nvidia-device-plugin-daemonset"}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"the GPU operator's device-plugin DaemonSet pod registers", owned, true},
		{"NVIDIA's standalone chart registers", standintest.Pod("nvdp", "nvdp-nvidia-device-plugin-abcde", "gpu-0", true, corev1.Container{
			Name: "nvidia-device-plugin-ctr", Image: "nvcr.io/nvidia/k8s-device-plugin:v0.20.0", Command: []string{"nvidia-device-plugin"},
		}), true},
		{"GKE's device plugin registers", standintest.Pod("kube-system", "nvidia-gpu-device-plugin-small-cos-5xq2w", "gpu-0", true, corev1.Container{
			Name: "nvidia-gpu-device-plugin", Image: "gke.gcr.io/nvidia-gpu-device-plugin@sha256:4b36a8d1e2f0",
		}), true},
		{"gpu-feature-discovery from the same image does not", standintest.Pod("nvdp", "nvdp-gpu-feature-discovery-abcde", "gpu-0", true, corev1.Container{
			Name: "gpu-feature-discovery-ctr", Image: "nvcr.io/nvidia/k8s-device-plugin:v0.20.0", Command: []string{"gpu-feature-discovery"},
		}), false},
		{"an unrelated pod does not", standintest.Pod("default", "web", "gpu-0", true, corev1.Container{Name: "web", Image: "nginx"}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsNVIDIADevicePluginPod(tc.pod); got != tc.want {
				t.Errorf("isNVIDIADevicePluginPod = %v, want %v", got, tc.want)
			}
		})
	}
}

func gpuResources(n *corev1.Node) (capacity, allocatable string) {
	c, okc := n.Status.Capacity[GPUResource]
	a, oka := n.Status.Allocatable[GPUResource]
	capacity, allocatable = "absent", "absent"
	if okc {
		capacity = c.String()
	}
	if oka {
		allocatable = a.String()
	}
	return capacity, allocatable
}

func TestDevicePluginStandInAdvertisesGPUsWhileThePluginRuns(t *testing.T) {
	cs := fake.NewClientset(standintest.Node("gpu-0", "5.15.0-1045-aws", nil), standintest.Node("cpu-0", "5.15.0-1045-aws", nil))
	ctx := context.Background()
	hw := map[string]standin.Hardware{"gpu-0": {GPUs: 2, GPUPCIClass: "0302"}, "cpu-0": {}}
	plugin := func(name, node string, ready bool) *corev1.Pod {
		p := standintest.Pod("gpu-operator", name, node, ready, corev1.Container{Name: "nvidia-device-plugin", Image: "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"})
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "nvidia-device-plugin-daemonset"}}
		return p
	}
	pod := standintest.CreateTyped(t, cs.CoreV1().Pods("gpu-operator").Create, plugin("plugin-gpu", "gpu-0", false))
	standintest.CreateTyped(t, cs.CoreV1().Pods("gpu-operator").Create, plugin("plugin-cpu", "cpu-0", true))
	standintest.Start(t, func(ctx context.Context, logf func(string, ...any)) error {
		return Run(ctx, cs, hw, standin.NewMIGHardware(), logf)
	})
	expect := func(node, wantCap, wantAlloc string) func(ctx context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			n, err := standintest.GetNode(ctx, cs, node)
			if err != nil {
				return "", err
			}
			if c, a := gpuResources(n); c != wantCap || a != wantAlloc {
				return fmt.Sprintf("%s: capacity %s allocatable %s, want %s and %s", node, c, a, wantCap, wantAlloc), nil
			}
			if n.Status.Capacity.Cpu().String() != "8" {
				return "other capacity lost", nil
			}
			return "", nil
		}
	}
	standintest.ConsistentlyOK(t, "nothing while the plugin is not ready", 300*time.Millisecond, expect("gpu-0", "absent", "absent"))

	pod.Status.Conditions[0].Status = corev1.ConditionTrue
	if _, err := cs.CoreV1().Pods("gpu-operator").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	standintest.EventuallyOK(t, "gpu-0 advertises its 2 GPUs", expect("gpu-0", "2", "2"))
	standintest.ConsistentlyOK(t, "a node without GPUs advertises none", 200*time.Millisecond, expect("cpu-0", "absent", "absent"))

	// Something rewrites the node's status without the extended resource.
	if _, err := cs.CoreV1().Nodes().Patch(ctx, "gpu-0", types.MergePatchType,
		[]byte(`{"status":{"capacity":{"nvidia.com/gpu":null},"allocatable":{"nvidia.com/gpu":null}}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	standintest.EventuallyOK(t, "the stand-in puts nvidia.com/gpu back", expect("gpu-0", "2", "2"))

	if err := cs.CoreV1().Pods("gpu-operator").Delete(ctx, "plugin-gpu", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	standintest.EventuallyOK(t, "with the plugin gone allocatable is 0 and capacity stays", expect("gpu-0", "2", "0"))
}
