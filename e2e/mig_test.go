package e2e

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
)

// TestMIG: on a GKE sandbox with an A100 pool and an L4 pool, --mig on the L4 pool is refused before
// any write; install --mig mixed --mig gpu-pool=all-1g.5gb labels the A100 nodes, NVIDIA's real
// operator deploys MIG manager there (the sandbox's stand-in partitions the simulated GPUs as
// mig-parted would, from the operator's own default-mig-parted-config), and the device plugin
// advertises nvidia.com/mig-1g.5gb, seven per A100 40 GB, while the L4 node keeps nvidia.com/gpu;
// uninstall gives every node its labels back exactly.
func TestMIG(t *testing.T) {
	t.Parallel()
	c, before, pools := twoGPUPools(t)

	t.Run("MIG on the L4 pool is refused before any write", func(t *testing.T) {
		code, _, stderr := gpuctl(t, c, "install", "--mig", "mixed", "--mig", unsharedPool+"=all-1g.10gb")
		if code != cli.ExitUsage {
			t.Fatalf("exit %d, want %d:\n%s", code, cli.ExitUsage, stderr)
		}
		if !strings.Contains(stderr, "nvidia-l4 GPUs, which have no MIG") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("want one line saying the L4s have no MIG:\n%s", stderr)
		}
		if rec, err := record.Read(t.Context(), c.Kube); err != nil || rec != nil {
			t.Errorf("an install record after the refusal: %+v, %v", rec, err)
		}
		if !maps.EqualFunc(before, nodesMetadata(t, c), func(a, b nodeMetadata) bool { return maps.Equal(a.Labels, b.Labels) }) {
			t.Error("the refused install changed node labels")
		}
	})

	res, _ := installJSON(t, c, "--mig", "mixed", "--mig", sharedPool+"=all-1g.5gb")
	if !res.Changed {
		t.Error("install changed nothing")
	}
	waitUntil(t, 5*time.Minute, "the A100s advertise MIG devices, the L4 whole GPUs", func(ctx context.Context) (bool, error) {
		list, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range list.Items {
			node, n := &list.Items[i], list.Items[i].Name
			switch {
			case slices.Contains(pools[sharedPool], n):
				mig, gpu := node.Status.Allocatable["nvidia.com/mig-1g.5gb"], node.Status.Allocatable["nvidia.com/gpu"]
				if node.Labels[plan.MIGLabel] != "all-1g.5gb" || node.Labels[plan.MIGStateLabel] != "success" ||
					mig.Value() != 7*gpusOf(c, n) || gpu.Value() != 0 {
					return false, nil
				}
			case slices.Contains(pools[unsharedPool], n):
				if _, ok := node.Labels[plan.MIGLabel]; ok && node.Labels[plan.MIGLabel] != before[n].Labels[plan.MIGLabel] {
					return false, nil
				}
				if q := node.Status.Allocatable["nvidia.com/gpu"]; q.Value() != gpusOf(c, n) || hasMIGResource(node) {
					return false, nil
				}
			}
		}
		return true, nil
	})
	for _, n := range pools[sharedPool] {
		if l := c.MIGLayout(n); l.Config != "all-1g.5gb" {
			t.Errorf("node %s: the GPUs' MIG layout is %q, want all-1g.5gb", n, l.Config)
		}
	}
	rec, err := record.Read(t.Context(), c.Kube)
	if err != nil || rec == nil || strings.Join(rec.Inputs.MIG, " ") != "mixed "+sharedPool+"=all-1g.5gb" {
		t.Errorf("the install record keeps --mig as %v (%v)", rec, err)
	}

	t.Run("verify passes, through nvidia.com/mig-1g.5gb on the A100s and nvidia.com/gpu on the L4", func(t *testing.T) {
		code, stdout, stderr := gpuctl(t, c, "verify", "--timeout", "2m", "-o", "json")
		if code != 0 {
			t.Fatalf("verify exited %d, want 0:\n%s\n%s", code, stdout, stderr)
		}
		got := verifyRequests(t, stdout)
		for pool, want := range map[string]string{sharedPool: "nvidia.com/mig-1g.5gb", unsharedPool: "nvidia.com/gpu"} {
			for _, n := range pools[pool] {
				if got[n] != want+" passed" {
					t.Errorf("node %s: %q, want %q", n, got[n], want+" passed")
				}
			}
		}
		assertNoVerifyPods(t, c)
	})

	t.Run("a pod asking for a MIG device gets one NVIDIA's plugin hands out", func(t *testing.T) {
		if real, why := c.NVIDIAsDevicePluginServes(pools[sharedPool][0]); !real {
			t.Skip(why)
		}
		// Under the mixed strategy NVIDIA's plugin names a MIG device by its MIG UUID.
		ids, answer := allocate(t, c, pools[sharedPool][0], "nvidia.com/mig-1g.5gb", 1)
		if len(ids) != 1 || !strings.HasPrefix(ids[0], "MIG-") {
			t.Errorf("the plugin handed out %v (answer %s), want one MIG device (MIG-…)", ids, answer)
		}
	})

	t.Run("upgrade to another config names the nodes it repartitions, then repartitions them", func(t *testing.T) {
		newMIG := []string{"--mig", "mixed", "--mig", sharedPool + "=all-3g.20gb"}
		before := clusterState(t, c)
		dry := upgradeJSON(t, c, append([]string{"--dry-run"}, newMIG...)...)
		m := dry.Preview.MIG
		if m == nil || strings.Join(m.From, " ") != "mixed "+sharedPool+"=all-1g.5gb" || strings.Join(m.To, " ") != "mixed "+sharedPool+"=all-3g.20gb" ||
			!slices.Equal(m.Repartition, pools[sharedPool]) || !dry.Preview.Changed() {
			t.Fatalf("preview MIG %+v: want all-1g.5gb → all-3g.20gb repartitioning %v", m, pools[sharedPool])
		}
		assertUnchanged(t, before, clusterState(t, c))
		upgradeJSON(t, c, append([]string{"--yes"}, newMIG...)...)
		waitUntil(t, 5*time.Minute, "the A100s advertise 3g.20gb devices", func(ctx context.Context) (bool, error) {
			list, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, node := range list.Items {
				q := node.Status.Allocatable["nvidia.com/mig-3g.20gb"]
				if slices.Contains(pools[sharedPool], node.Name) && (node.Labels[plan.MIGStateLabel] != "success" || q.Value() != 2*gpusOf(c, node.Name)) {
					return false, nil
				}
			}
			return true, nil
		})
		for _, n := range pools[sharedPool] {
			if l := c.MIGLayout(n); l.Config != "all-3g.20gb" {
				t.Errorf("node %s: the GPUs' MIG layout is %q, want all-3g.20gb", n, l.Config)
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

func hasMIGResource(n *corev1.Node) bool {
	for r := range n.Status.Allocatable {
		if strings.HasPrefix(string(r), "nvidia.com/mig-") {
			return true
		}
	}
	return false
}

// TestMIGSingle: install --mig single --mig gpu-pool=all-1g.5gb on the GKE sandbox's A100 pool. Under
// the single strategy NVIDIA's device plugin advertises each MIG device as nvidia.com/gpu, seven per
// A100 40 GB, and GFD names the product by its MIG profile
// (NVIDIA/k8s-device-plugin internal/lm/mig-strategy.go at v0.19.0): NVIDIA's code decides, read back
// from the nodes; a pod asking for nvidia.com/gpu gets a MIG device. uninstall then gives every node
// its labels back.
func TestMIGSingle(t *testing.T) {
	t.Parallel()
	c, before, pools := twoGPUPools(t)
	node := pools[sharedPool][0]
	if real, why := c.NVIDIAsDevicePluginServes(node); !real {
		t.Skip(why)
	}
	installJSON(t, c, "--mig", "single", "--mig", sharedPool+"=all-1g.5gb")
	waitUntil(t, 5*time.Minute, "the A100s advertise their MIG devices as nvidia.com/gpu", func(ctx context.Context) (bool, error) {
		for _, n := range pools[sharedPool] {
			node, err := c.Kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			gpu := node.Status.Allocatable["nvidia.com/gpu"]
			if gpu.Value() != 7*gpusOf(c, n) || node.Labels["nvidia.com/gpu.product"] != "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb" {
				return false, nil
			}
		}
		return true, nil
	})
	ids, answer := allocate(t, c, node, "nvidia.com/gpu", 1)
	if len(ids) != 1 || !strings.HasPrefix(ids[0], "MIG-") {
		t.Errorf("the plugin handed out %v (answer %s), want one MIG device (MIG-…)", ids, answer)
	}
	if code, _, stderr := uninstallJSON(t, c, "--yes"); code != 0 {
		t.Fatalf("uninstall exited %d:\n%s", code, stderr)
	}
	after := nodesMetadata(t, c)
	for n, b := range before {
		if !maps.Equal(b.Labels, after[n].Labels) {
			t.Errorf("node %s: labels %v, want %v", n, after[n].Labels, b.Labels)
		}
	}
}
