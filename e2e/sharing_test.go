package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// The GKE sandbox's two GPU pools (e2e/sandbox/flavor/gke.go): A100s in gpu-pool, L4s in l4-pool.
const (
	sharedPool   = "gpu-pool"
	unsharedPool = "l4-pool"
)

// TestSharing: on a GKE sandbox with two GPU pools, install --sharing gpu-pool=time-slicing=4 makes
// the device plugin (the sandbox's stand-in, reading the ConfigMap the operator mounts as NVIDIA's
// plugin does) advertise 4× the GPUs of that pool's nodes and leaves the other pool as it was; verify
// passes; upgrade --sharing gpu-pool=mps=2 switches the nodes to 2×; upgrade without --sharing keeps
// it; uninstall gives every node back its labels exactly.
func TestSharing(t *testing.T) {
	t.Parallel()
	c, before, pools := twoGPUPools(t)

	t.Run("an unknown pool is refused before any write, naming the pools", func(t *testing.T) {
		code, _, stderr := gpuctl(t, c, "install", "--sharing", "no-such-pool=time-slicing=4")
		if code != cli.ExitUsage {
			t.Fatalf("exit %d, want %d:\n%s", code, cli.ExitUsage, stderr)
		}
		for _, want := range []string{"no-such-pool", sharedPool, unsharedPool} {
			if !strings.Contains(stderr, want) {
				t.Errorf("the refusal does not name %q:\n%s", want, stderr)
			}
		}
		if !maps.EqualFunc(before, nodesMetadata(t, c), func(a, b nodeMetadata) bool { return maps.Equal(a.Labels, b.Labels) }) {
			t.Error("the refused install changed node labels")
		}
	})

	var dryLabels []plan.LabelWrite // what the dry run says the run writes on the nodes
	t.Run("the dry run shows the ConfigMap's content, the values and each node's label", func(t *testing.T) {
		code, stdout, stderr := gpuctl(t, c, "install", "--dry-run", "-o", "json", "--sharing", sharedPool+"=time-slicing=4")
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, stderr)
		}
		var p plan.Plan // the dry run's document is the Plan
		if err := json.Unmarshal([]byte(stdout), &p); err != nil {
			t.Fatal(err)
		}
		labels := sharingLabels(t, &p)
		if p.Writes == nil || len(p.Writes.Labels) != len(pools[sharedPool]) {
			t.Errorf("the dry run's writes list the labels %+v, want one per node of %s", p.Writes, sharedPool)
		} else {
			dryLabels = p.Writes.Labels
		}
		for _, n := range pools[sharedPool] {
			if labels[n] != "time-slicing-4" {
				t.Errorf("node %s: planned label %q, want time-slicing-4", n, labels[n])
			}
		}
		for _, n := range pools[unsharedPool] {
			if _, ok := labels[n]; ok {
				t.Errorf("node %s of %s is labelled", n, unsharedPool)
			}
		}
		cfg := operatorValues(t, &p)["devicePlugin"].(map[string]any)["config"].(map[string]any)
		if cfg["name"] != plan.SharingConfigMap || cfg["create"] != true || cfg["default"] != "" {
			t.Errorf("devicePlugin.config = %v", cfg)
		}
		doc, _ := cfg["data"].(map[string]any)["time-slicing-4"].(string)
		if !strings.Contains(doc, "timeSlicing:") || !strings.Contains(doc, "replicas: 4") {
			t.Errorf("the ConfigMap's time-slicing-4:\n%s", doc)
		}
	})

	installJSON(t, c, "--sharing", sharedPool+"=time-slicing=4")
	t.Run("the run wrote the node labels the dry run listed, read back from the API server", func(t *testing.T) {
		after := nodesMetadata(t, c)
		listed := map[string]bool{}
		for _, w := range dryLabels {
			listed[w.Node] = true
			if got, ok := after[w.Node].Labels[w.Key]; !ok || got != w.Value || w.Remove {
				t.Errorf("node %s: %s=%q after the run, the dry run listed %s", w.Node, w.Key, got, w)
			}
		}
		for n, md := range after {
			if v, ok := md.Labels["nvidia.com/device-plugin.config"]; ok && !listed[n] && before[n].Labels["nvidia.com/device-plugin.config"] != v {
				t.Errorf("node %s got nvidia.com/device-plugin.config=%s, which the dry run did not list", n, v)
			}
		}
	})
	waitAdvertised(t, c, pools, 4)

	t.Run("status shows the shared pool time-sliced 4 ways and the other unshared", func(t *testing.T) {
		var pools map[string]engine.PoolStatus
		// GPU feature discovery's labels follow the advertised GPUs: wait for them, then judge all.
		waitUntil(t, 2*time.Minute, "status shows the shared pool's sharing", func(context.Context) (bool, error) {
			pools = statusPools(t, c)
			return pools[sharedPool].Sharing == plan.SharingTimeSlicing, nil
		})
		for _, name := range []string{sharedPool, unsharedPool} {
			if got := pools[name].Nodes; len(got) != len(gpuPools(t, c)[name]) {
				t.Errorf("status's pool %s has nodes %v, want %v", name, got, gpuPools(t, c)[name])
			}
		}
		if p := pools[sharedPool]; p.Replicas != 4 || p.DevicePluginConfig != "time-slicing-4" || p.Advertised["nvidia.com/gpu"] != 4*poolGPUs(c, p.Nodes) {
			t.Errorf("pool %s: %+v, want time-slicing with 4 replicas, config time-slicing-4, 4× its GPUs advertised", sharedPool, p)
		}
		if p := pools[unsharedPool]; p.Sharing != "none" || p.Replicas != 1 || p.DevicePluginConfig != "" || p.Advertised["nvidia.com/gpu"] != poolGPUs(c, p.Nodes) {
			t.Errorf("pool %s: %+v, want no sharing and its GPUs advertised", unsharedPool, p)
		}
	})

	t.Run("verify passes on the shared GPUs", func(t *testing.T) {
		if code, _, stderr := gpuctl(t, c, "verify"); code != 0 {
			t.Fatalf("verify exited %d:\n%s", code, stderr)
		}
	})

	t.Run("a pod asking for a shared GPU runs on a replica NVIDIA's plugin hands out", func(t *testing.T) {
		if real, why := c.NVIDIAsDevicePluginServes(pools[sharedPool][0]); !real {
			t.Skip(why)
		}
		// Time-slicing replicas are the GPU's UUID and the replica's number
		// (NVIDIA/k8s-device-plugin internal/rm/devices.go at v0.19.0, AnnotatedID).
		ids, answer := allocate(t, c, pools[sharedPool][0], "nvidia.com/gpu", 1)
		if len(ids) != 1 || !strings.HasPrefix(ids[0], "GPU-") || !strings.Contains(ids[0], "::") {
			t.Errorf("the plugin handed out %v (answer %s), want one replica of a GPU (GPU-…::n)", ids, answer)
		}
	})

	t.Run("upgrade to mps=2 switches the pool's nodes", func(t *testing.T) {
		res := upgradeJSON(t, c, "--yes", "--sharing", sharedPool+"=mps=2")
		if res.Preview == nil || !res.Preview.Changed() {
			t.Errorf("the upgrade preview shows no change: %+v", res.Preview)
		}
		waitAdvertised(t, c, pools, 2)
		for _, n := range pools[sharedPool] {
			if got := nodeLabel(t, c, n, plan.SharingLabel); got != "mps-2" {
				t.Errorf("node %s: %s=%q, want mps-2", n, plan.SharingLabel, got)
			}
		}
	})

	t.Run("upgrade without --sharing keeps the recorded choice", func(t *testing.T) {
		upgradeJSON(t, c, "--yes")
		for _, n := range pools[sharedPool] {
			if got := nodeLabel(t, c, n, plan.SharingLabel); got != "mps-2" {
				t.Errorf("node %s: %s=%q, want mps-2", n, plan.SharingLabel, got)
			}
		}
	})

	t.Run("uninstall puts every node's labels back exactly", func(t *testing.T) {
		if code, _, stderr := uninstallJSON(t, c, "--yes"); code != 0 {
			t.Fatalf("uninstall exited %d:\n%s", code, stderr)
		}
		after := nodesMetadata(t, c)
		for n, b := range before {
			if !maps.Equal(b.Labels, after[n].Labels) {
				t.Errorf("node %s: labels %v, want %v", n, after[n].Labels, b.Labels)
			}
		}
	})
}

// twoGPUPools is a clean GKE sandbox with two A100 nodes in sharedPool and an L4 node in
// unsharedPool, its nodes' metadata before anything ran, and its GPU nodes by pool.
func twoGPUPools(t *testing.T) (*sandbox.Cluster, map[string]nodeMetadata, map[string][]string) {
	t.Helper()
	c := cleanSandbox(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "gke", GPUNodes: 2, ExtraGPUNodes: 1, CPUNodes: 1}}).Cluster
	before := nodesMetadata(t, c)
	pools := gpuPools(t, c)
	if len(pools[sharedPool]) != 2 || len(pools[unsharedPool]) != 1 {
		t.Fatalf("GPU nodes by pool: %v, want 2 in %s and 1 in %s", pools, sharedPool, unsharedPool)
	}
	return c, before, pools
}

// gpuPools maps each GKE node pool to its GPU nodes.
func gpuPools(t *testing.T, c *sandbox.Cluster) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, n := range c.Nodes {
		if n.Hardware.GPUs > 0 {
			pool := n.Node.Labels["cloud.google.com/gke-nodepool"]
			out[pool] = append(out[pool], n.Node.Name)
		}
	}
	return out
}

// statusPools runs gpuctl status -o json and returns its GPU node pools by name.
func statusPools(t *testing.T, c *sandbox.Cluster) map[string]engine.PoolStatus {
	t.Helper()
	_, stdout, stderr := gpuctl(t, c, "status", "-o", "json")
	var res engine.StatusResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, stderr)
	}
	out := map[string]engine.PoolStatus{}
	for _, p := range res.Pools {
		out[p.Name] = p
	}
	return out
}

// poolGPUs is how many GPUs the sandbox gave the nodes.
func poolGPUs(c *sandbox.Cluster, nodes []string) int64 {
	var n int64
	for _, node := range nodes {
		n += gpusOf(c, node)
	}
	return n
}

// gpusOf is how many GPUs the sandbox gave a node.
func gpusOf(c *sandbox.Cluster, node string) int64 {
	for _, n := range c.Nodes {
		if n.Node.Name == node {
			return int64(n.Hardware.GPUs)
		}
	}
	return 0
}

// waitAdvertised waits until the shared pool's nodes advertise replicas× their GPUs in allocatable
// and the other pool's their GPUs.
func waitAdvertised(t *testing.T, c *sandbox.Cluster, pools map[string][]string, replicas int64) {
	t.Helper()
	want := map[string]int64{}
	for _, n := range pools[sharedPool] {
		want[n] = replicas * gpusOf(c, n)
	}
	for _, n := range pools[unsharedPool] {
		want[n] = gpusOf(c, n)
	}
	waitUntil(t, 5*time.Minute, "the nodes advertise the shared GPUs", func(ctx context.Context) (bool, error) {
		list, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		got := map[string]int64{}
		for _, node := range list.Items {
			if _, ok := want[node.Name]; ok {
				q := node.Status.Allocatable["nvidia.com/gpu"]
				got[node.Name] = q.Value()
			}
		}
		return maps.Equal(got, want), nil
	})
}

func nodeLabel(t *testing.T, c *sandbox.Cluster, node, key string) string {
	t.Helper()
	n, err := c.Kube.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Labels[key]
}

// sharingLabels are the plan's node labels for --sharing, by node.
func sharingLabels(t *testing.T, p *plan.Plan) map[string]string {
	t.Helper()
	for _, s := range p.Steps {
		if s.Kind == plan.KindNodeLabels && s.Labels != nil {
			return s.Labels.Nodes
		}
	}
	t.Fatal("the plan has no node-labels step")
	return nil
}

// operatorValues are the values the plan gives the operator release.
func operatorValues(t *testing.T, p *plan.Plan) map[string]any {
	t.Helper()
	for _, s := range p.Steps {
		if s.Release != nil && s.Release.Name == plan.OperatorRelease {
			return normalize(t, s.Release.Values)
		}
	}
	t.Fatal("the plan has no operator release")
	return nil
}
