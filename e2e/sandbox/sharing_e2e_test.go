package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// GPU sharing and MIG as an admin sets them up with NVIDIA's docs (gpu-operator/gpu-sharing.rst,
// gpu-operator-mig.rst), through the real operator v26.7.0 and the device-plugin, GFD and MIG-manager
// stand-ins: a time-slicing ConfigMap named in the ClusterPolicy's devicePlugin.config and picked by
// one node's label makes that node's nvidia.com/gpu four times its GPUs and leaves the others alone;
// mig.strategy mixed and mig.config all-1g.10gb on an H100 node give nvidia.com/mig-1g.10gb and
// mig.config.state success; the operator keeps MIG manager off an L4 node, and forced onto it, MIG
// manager fails a MIG config there.
func TestGPUSharingAndMIGThroughTheRealOperator(t *testing.T) {
	t.Parallel()
	c := StartT(t, Options{Scenario: Scenario{Distro: "kubeadm", GPUNodes: 2, ExtraGPUNodes: 1, CPUNodes: 0, NFDLabels: true}})
	ctx := t.Context()
	dyn := dynamic.NewForConfigOrDie(c.Config)
	const ns = "gpu-operator"
	b, warning, err := c.Tools.Operator("v26.7.0")
	if err != nil {
		t.Fatal(err)
	}
	if warning != "" {
		t.Logf("WARNING: %s", warning)
	}
	deployOperator(t, c, ns, b, "nvcr.io/nvidia/gpu-operator:v26.7.0")
	waitClusterPolicyReady(t, ctx, dyn, "cluster-policy", 4*time.Minute)

	var h100, l4 []string
	for _, n := range c.Nodes {
		switch n.Hardware.GPUProduct {
		case standin.GPUH100SXM80:
			h100 = append(h100, n.Node.Name)
		case standin.GPUL4:
			l4 = append(l4, n.Node.Name)
		}
	}
	if len(h100) != 2 || len(l4) != 1 {
		t.Fatalf("nodes: H100 %v, L4 %v; want two and one", h100, l4)
	}
	gpus := int64(c.Scenario.GPUsPerNode)
	sliced, migNode, l4Node := h100[0], h100[1], l4[0]

	patchPolicy := func(t *testing.T, spec map[string]any) {
		t.Helper()
		data, err := json.Marshal(map[string]any{"spec": spec})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(clusterPolicyGVR).Patch(ctx, "cluster-policy", types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	label := func(t *testing.T, node string, labels map[string]string) {
		t.Helper()
		data, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, data, metav1.PatchOptions{FieldManager: "kubectl-label"}); err != nil {
			t.Fatal(err)
		}
	}
	// waitNodes polls until every node's check passes, and reports the last complaint otherwise.
	waitNodes := func(t *testing.T, what string, checks map[string]func(*corev1.Node) string) {
		t.Helper()
		last := ""
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			for name, check := range checks {
				n, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if last = check(n); last != "" {
					last = name + ": " + last
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("%s: %v; last: %s", what, err, last)
		}
	}
	allocatable := func(res corev1.ResourceName, want int64) func(*corev1.Node) string {
		return func(n *corev1.Node) string {
			if q, ok := n.Status.Allocatable[res]; !ok || q.Value() != want {
				return fmt.Sprintf("allocatable %s %v, want %d", res, n.Status.Allocatable[res], want)
			}
			return ""
		}
	}
	labels := func(want map[string]string) func(*corev1.Node) string {
		return func(n *corev1.Node) string {
			for k, v := range want {
				if n.Labels[k] != v {
					return fmt.Sprintf("label %s=%q, want %q", k, n.Labels[k], v)
				}
			}
			return ""
		}
	}
	all := func(checks ...func(*corev1.Node) string) func(*corev1.Node) string {
		return func(n *corev1.Node) string {
			for _, check := range checks {
				if p := check(n); p != "" {
					return p
				}
			}
			return ""
		}
	}

	t.Run("before any config every GPU node advertises its GPUs and GFD's labels", func(t *testing.T) {
		waitNodes(t, "whole GPUs", map[string]func(*corev1.Node) string{
			sliced:  all(allocatable("nvidia.com/gpu", gpus), labels(map[string]string{"nvidia.com/gpu.product": standin.GPUH100SXM80, "nvidia.com/mig.capable": "true"})),
			migNode: allocatable("nvidia.com/gpu", gpus),
			l4Node:  all(allocatable("nvidia.com/gpu", gpus), labels(map[string]string{"nvidia.com/gpu.product": standin.GPUL4, "nvidia.com/mig.capable": "false"})),
		})
	})

	t.Run("time-slicing picked by one node's label makes its GPUs four each, the others unchanged", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "time-slicing-config"}, Data: map[string]string{
			"h100-ts": "version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n",
		}}
		if _, err := c.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		patchPolicy(t, map[string]any{"devicePlugin": map[string]any{"config": map[string]any{"name": "time-slicing-config", "default": ""}}})
		label(t, sliced, map[string]string{"nvidia.com/device-plugin.config": "h100-ts"})
		// The operator did its part: the plugin's pods mount the ConfigMap and run config-manager.
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			ds, err := c.Kube.AppsV1().DaemonSets(ns).Get(ctx, "nvidia-device-plugin-daemonset", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, ctr := range ds.Spec.Template.Spec.Containers {
				if ctr.Name == "config-manager" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("the operator gave the device plugin no config-manager: %v", err)
		}
		waitNodes(t, "time-slicing on one node", map[string]func(*corev1.Node) string{
			sliced: all(allocatable("nvidia.com/gpu", 4*gpus), labels(map[string]string{
				"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.product": standin.GPUH100SXM80 + "-SHARED",
			})),
			migNode: all(allocatable("nvidia.com/gpu", gpus), labels(map[string]string{"nvidia.com/gpu.sharing-strategy": "none"})),
			l4Node:  allocatable("nvidia.com/gpu", gpus),
		})
	})

	t.Run("MIG mixed with all-1g.10gb on an H100 gives nvidia.com/mig-1g.10gb and state success", func(t *testing.T) {
		patchPolicy(t, map[string]any{"mig": map[string]any{"strategy": "mixed"}})
		label(t, migNode, map[string]string{"nvidia.com/mig.config": "all-1g.10gb"})
		waitNodes(t, "MIG on the H100", map[string]func(*corev1.Node) string{
			migNode: all(allocatable("nvidia.com/mig-1g.10gb", 7*gpus), allocatable("nvidia.com/gpu", 0), labels(map[string]string{
				"nvidia.com/mig.config.state": "success", "nvidia.com/mig.strategy": "mixed", "nvidia.com/mig-1g.10gb.count": fmt.Sprint(7 * gpus),
			})),
			// The time-sliced node keeps its replicas: its GPUs have MIG off (the operator's all-disabled).
			sliced: all(allocatable("nvidia.com/gpu", 4*gpus), labels(map[string]string{"nvidia.com/mig.config": "all-disabled", "nvidia.com/mig.config.state": "success"})),
		})
	})

	t.Run("the operator keeps MIG manager off the L4; forced onto it, a MIG config fails", func(t *testing.T) {
		n, err := c.Kube.CoreV1().Nodes().Get(ctx, l4Node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := n.Labels["nvidia.com/gpu.deploy.mig-manager"]; ok {
			t.Errorf("the operator set nvidia.com/gpu.deploy.mig-manager=%q on an L4 node", v)
		}
		// all-3g.40gb has no device filter: mig-parted tries MIG on every GPU, which an L4 has not.
		label(t, l4Node, map[string]string{"nvidia.com/gpu.deploy.mig-manager": "true", "nvidia.com/mig.config": "all-3g.40gb"})
		waitNodes(t, "MIG on the L4", map[string]func(*corev1.Node) string{
			l4Node: all(labels(map[string]string{"nvidia.com/mig.config.state": "failed"}), allocatable("nvidia.com/gpu", gpus)),
		})
		n, err = c.Kube.CoreV1().Nodes().Get(ctx, l4Node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for res := range n.Status.Allocatable {
			if strings.HasPrefix(string(res), "nvidia.com/mig-") {
				t.Errorf("the L4 node advertises %s", res)
			}
		}
		if l := c.MIGLayout(l4Node); l.Config != "" {
			t.Errorf("the L4 node has a MIG layout: %s", l.Encode())
		}
	})
}
