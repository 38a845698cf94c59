package e2e

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
)

// TestGPUWork: on a GKE sandbox with an A100 pool and an L4 pool, a change that takes GPUs away from
// running pods is refused (exit 5) naming each pod, with nothing changed, and goes ahead with --force:
// a pod holding an A100 stops `upgrade --mig mixed --mig gpu-pool=all-1g.5gb`, and any GPU pod stops
// the switch to the DRA stack. With no GPU pod the switch ends (exit 0) within a few minutes of the
// GPUCluster being ready, instead of waiting out its timeout on "0/0 operand DaemonSets rolled out"
// (issue 32: exit 4 after 12 minutes).
func TestGPUWork(t *testing.T) {
	c, _, pools := twoGPUPools(t)
	ctx := t.Context()
	a100 := pools[sharedPool][0]
	installJSON(t, c)

	// A pod holding one of a100's GPUs through the device plugin, as any CUDA job would.
	holdGPU(t, c, "cuda", a100, corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")})

	migArgs := []string{"--mig", "mixed", "--mig", sharedPool + "=all-1g.5gb"}
	story(t,
		step{"a MIG change under the running pod is refused, naming it, and nothing changes", func(t *testing.T) {
			before, revision := settledState(t, c), helmRelease(t, c, plan.OperatorRelease).Revision
			// The dry run says the run would stop, and why.
			code, _, stderr := gpuctl(t, c, append([]string{"upgrade", "--dry-run"}, migArgs...)...)
			if code != 0 || !strings.Contains(stderr, "the run would stop before its first write (exit 5)") || !strings.Contains(stderr, "default/cuda on node "+a100) {
				t.Errorf("upgrade --dry-run %v: exit %d, want 0 and the refusal the run would make, naming the pod:\n%s", migArgs, code, stderr)
			}
			code, _, stderr = gpuctl(t, c, append([]string{"upgrade", "--yes"}, migArgs...)...)
			if code != cli.ExitPreflight {
				t.Fatalf("upgrade %v exited %d, want %d:\n%s", migArgs, code, cli.ExitPreflight, stderr)
			}
			for _, want := range []string{preflight.GPUWorkCheck, "default/cuda on node " + a100, "MIG manager repartitions",
				"kubectl drain " + a100 + " --ignore-daemonsets --delete-emptydir-data", "--force"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, stderr)
				}
			}
			assertUnchanged(t, before, clusterState(t, c))
			if got := helmRelease(t, c, plan.OperatorRelease).Revision; got != revision {
				t.Errorf("release %s at revision %d, want %d", plan.OperatorRelease, got, revision)
			}
		}},

		step{"with --force the MIG change goes ahead", func(t *testing.T) {
			upgradeJSON(t, c, append([]string{"--yes", "--force"}, migArgs...)...)
			for _, n := range pools[sharedPool] {
				if got := nodeLabel(t, c, n, plan.MIGLabel); got != "all-1g.5gb" {
					t.Errorf("node %s: %s=%q, want all-1g.5gb", n, plan.MIGLabel, got)
				}
			}
		}},

		step{"the switch to the DRA stack is refused while a GPU pod runs, naming it", func(t *testing.T) {
			before := clusterState(t, c)
			code, _, stderr := gpuctl(t, c, "upgrade", "--mig", "none", "--dra", "--sharing", "none", "--yes")
			if code != cli.ExitPreflight {
				t.Fatalf("upgrade --dra exited %d, want %d:\n%s", code, cli.ExitPreflight, stderr)
			}
			for _, want := range []string{"default/cuda on node " + a100, "the DRA stack replaces the device plugin"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, stderr)
				}
			}
			assertUnchanged(t, before, clusterState(t, c))
		}},

		step{"with no GPU pod the switch ends within minutes of the GPUCluster being ready", func(t *testing.T) {
			if err := c.Kube.CoreV1().Pods("default").Delete(ctx, "cuda", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, time.Minute, "pod cuda is gone", func(ctx context.Context) (bool, error) {
				l, err := c.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=cuda"})
				return err == nil && len(l.Items) == 0, err
			})
			ready := gpuClusterReadyAt(t, c)
			start := time.Now()
			code, _, stderr := gpuctl(t, c, "upgrade", "--mig", "none", "--dra", "--sharing", "none", "--yes", "--timeout", "10m")
			end := time.Now()
			if code != 0 {
				t.Fatalf("upgrade --dra exited %d after %s, want 0:\n%s", code, end.Sub(start).Round(time.Second), stderr)
			}
			at := time.Unix(0, ready.Load())
			if ready.Load() == 0 {
				t.Fatal("the upgrade ended before GPUCluster gpu-cluster was ready")
			}
			if d := end.Sub(at); d > 3*time.Minute {
				t.Errorf("the upgrade ended %s after the GPUCluster was ready, want within 3m", d.Round(time.Second))
			}
			t.Logf("upgrade --dra took %s, and ended %s after the GPUCluster was ready", end.Sub(start).Round(time.Second), end.Sub(at).Round(time.Second))
		}},
	)
}

// TestGPUWorkMIGOnT4s: on a k3s sandbox, whose T4s cannot do MIG and whose GPU models nothing names
// before GPU Feature Discovery runs, `install --mig mixed` plans to decide after GPU Feature Discovery
// (the dry run says so), and once GFD has labelled the nodes it stops with exit 2 naming each node
// and its model, labelling no node: never a silent exit 0.
func TestGPUWorkMIGOnT4s(t *testing.T) {
	c := cleanSandbox(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "k3s", GPUNodes: 2, CPUNodes: 1}}).Cluster
	gpuNodes := simulatedGPUNodes(c)

	t.Run("the dry run says it decides after GPU Feature Discovery", func(t *testing.T) {
		code, stdout, stderr := gpuctl(t, c, "install", "--mig", "mixed", "--dry-run")
		if code != 0 {
			t.Fatalf("install --mig mixed --dry-run exited %d:\n%s", code, stderr)
		}
		if !strings.Contains(stdout+stderr, "decide after GPU Feature Discovery") {
			t.Errorf("the dry run does not say it decides after GPU Feature Discovery:\n%s\n%s", stdout, stderr)
		}
	})

	t.Run("the install stops with exit 2 naming the nodes and their T4s", func(t *testing.T) {
		code, _, stderr := gpuctl(t, c, "install", "--mig", "mixed", "--timeout", "10m")
		if code != cli.ExitUsage {
			t.Fatalf("install --mig mixed exited %d, want %d:\n%s", code, cli.ExitUsage, stderr)
		}
		last := lastLine(stderr)
		for _, n := range gpuNodes {
			if !strings.Contains(last, n+" (Tesla-T4)") {
				t.Errorf("the last line does not name node %s and its Tesla-T4: %q", n, last)
			}
		}
		nodes, err := c.Kube.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes.Items {
			if v, ok := n.Labels[plan.MIGLabel]; ok {
				t.Errorf("node %s labelled %s=%s", n.Name, plan.MIGLabel, v)
			}
			if slices.Contains(gpuNodes, n.Name) && n.Labels[plan.MIGCapableLabel] != "false" {
				t.Errorf("node %s: GPU Feature Discovery's %s=%q, want false", n.Name, plan.MIGCapableLabel, n.Labels[plan.MIGCapableLabel])
			}
		}
		if real, _ := c.NVIDIAsDevicePluginServes(gpuNodes[0]); real {
			// The label gpuctl decided by is NVIDIA's GFD's, read from the T4s' NVML.
			assertGFDLabels(t, c, "gpu-operator", gpuNodes)
		}
	})
}

// holdGPU runs a pod in default on node that asks for resources, and deletes it when the test ends.
func holdGPU(t *testing.T, c *sandbox.Cluster, name, node string, resources corev1.ResourceList) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": node},
			Tolerations:  []corev1.Toleration{{Key: plan.TaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{{Name: "cuda", Image: "nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04",
				Resources: corev1.ResourceRequirements{Limits: resources}}},
		}}
	if _, err := c.Kube.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kube.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	if p := waitPodsReady(t, c, "default", "app="+name, 1)[0]; p.Spec.NodeName != node {
		t.Fatalf("pod %s runs on %s, want %s", name, p.Spec.NodeName, node)
	}
}

// gpuClusterReadyAt watches, from now on, for GPUCluster gpu-cluster to be ready and holds the first
// time it was seen so (0 until then), until the test ends.
func gpuClusterReadyAt(t *testing.T, c *sandbox.Cluster) *atomic.Int64 {
	t.Helper()
	var at atomic.Int64
	dyn := dynamicClient(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			gc, err := dyn.Resource(health.GPUClusterResource()).Get(ctx, plan.GPUClusterName, metav1.GetOptions{})
			if err == nil && health.ReadGPUClusterStatus(gc).Ready() {
				at.Store(time.Now().UnixNano())
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return &at
}

// lastLine is the last non-empty line of s: the one line gpuctl ends a failed run with.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
