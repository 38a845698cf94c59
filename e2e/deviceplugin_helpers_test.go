package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/e2e/sandbox/kubeletdm"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// nodeFeatures are NFD's NodeFeature objects (nfd.k8s-sigs.io/v1alpha1).
var nodeFeatures = schema.GroupVersionResource{Group: "nfd.k8s-sigs.io", Version: "v1alpha1", Resource: "nodefeatures"}

// assertGFDLabels checks that NVIDIA's GPU Feature Discovery labelled each node the real way: its
// NodeFeature "nvidia-features-for-<node>" (GFD's name for it, internal/lm/output.go at v0.19.0)
// holds nvidia.com/gpu.product, and nfd-master put it on the node.
func assertGFDLabels(t *testing.T, c *sandbox.Cluster, namespace string, nodes []string) {
	t.Helper()
	dyn := dynamicClient(t, c)
	for _, node := range nodes {
		var product string
		waitUntil(t, 3*time.Minute, "GFD's NodeFeature of "+node+" is on the node", func(ctx context.Context) (bool, error) {
			nf, err := dyn.Resource(nodeFeatures).Namespace(namespace).Get(ctx, "nvidia-features-for-"+node, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			labels, _, _ := unstructuredStringMap(nf.Object, "spec", "labels")
			product = labels["nvidia.com/gpu.product"]
			n, err := c.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			return err == nil && product != "" && n.Labels["nvidia.com/gpu.product"] == product, err
		})
		if want := hardwareOf(c, node).GPUProduct; product != want {
			t.Errorf("node %s: GFD reports nvidia.com/gpu.product=%s, want %s", node, product, want)
		}
	}
}

// allocate runs a pod on node asking for n of resource and returns the device IDs the node's device
// plugin handed out (the kubelet device manager's record of the plugin's Allocate answer), and what
// the answer gave the container: its environment and its CDI devices and annotations, as JSON. The pod is deleted when the test ends.
func allocate(t *testing.T, c *sandbox.Cluster, node, res string, n int64) ([]string, string) {
	t.Helper()
	name := "gpu-user-" + strings.NewReplacer("/", "-", ".", "-").Replace(res)
	holdGPU(t, c, name, node, corev1.ResourceList{corev1.ResourceName(res): *resource.NewQuantity(n, resource.DecimalSI)})
	var ids, answer string
	waitUntil(t, 2*time.Minute, fmt.Sprintf("pod %s on %s gets %d %s from the device plugin", name, node, n, res), func(ctx context.Context) (bool, error) {
		p, err := c.Kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if msg := p.Annotations[kubeletdm.ErrorAnnotation]; msg != "" {
			return false, fmt.Errorf("allocation failed: %s", msg)
		}
		ids, answer = p.Annotations[kubeletdm.DevicesAnnotation(res)], p.Annotations[kubeletdm.EnvsAnnotation]+p.Annotations[kubeletdm.CDIAnnotation]
		return ids != "", nil
	})
	return strings.Split(ids, ","), answer
}

// unstructuredStringMap reads a map of strings at fields of obj.
func unstructuredStringMap(obj map[string]any, fields ...string) (map[string]string, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[f]
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return nil, false, nil
	}
	out := map[string]string{}
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out, true, nil
}

// hardwareOf is a simulated node's hardware.
func hardwareOf(c *sandbox.Cluster, node string) standin.Hardware {
	for _, n := range c.Nodes {
		if n.Node.Name == node {
			return n.Hardware
		}
	}
	return standin.Hardware{}
}

// settledState is clusterState once it holds still: install returns when the validators pass, while
// GPU Feature Discovery's labels may still be on their way (NVIDIA's GFD publishes a NodeFeature and
// nfd-master labels the node), and the operator then deploys what they select (MIG manager on
// MIG-capable nodes). A test that proves a refused command changed nothing starts from the settled
// state, not from one the operator is still acting on.
func settledState(t *testing.T, c *sandbox.Cluster) map[string]string {
	t.Helper()
	var state map[string]string
	waitUntil(t, 3*time.Minute, "the cluster holds still after the install", func(ctx context.Context) (bool, error) {
		first := clusterState(t, c)
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(5 * time.Second):
		}
		state = clusterState(t, c)
		return maps.Equal(first, state), nil
	})
	return state
}
