package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/e2e/upstream"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/record"
)

// TestAdoptNVIDIAsOwnRelease: the cluster users most often meet gpuctl on already runs NVIDIA's stack,
// installed as NVIDIA's and the distributions' guides have it: NVIDIA's own chart (v26.7.0, from
// NVIDIA's sources) with Helm v3 as release gpu-operator in namespace gpu-operator, driver.enabled=false
// (a node image with the driver, as DGX OS or GKE have), NFD as its subchart. That release has
// gpuctl's name but is not gpuctl's:
//   - gpuctl install refuses it (exit 5), names it and --adopt, and changes nothing: the Helm revision,
//     its values, the stack's objects and the nodes' labels;
//   - gpuctl uninstall, with no install record, refuses too;
//   - gpuctl install --adopt --dry-run lists what of it is kept and what changes, writing nothing;
//   - gpuctl install --adopt takes it over keeping driver.enabled=false, keeps the subchart's NFD
//     running as it was (the same DaemonSet, outside the release) with the nodes still labelled, and
//     the real v26.7.0 controller reconciles; the release is
//     gpuctl's from then on (a rerun without --adopt changes nothing) and the record says it was adopted.
func TestAdoptNVIDIAsOwnRelease(t *testing.T) {
	t.Parallel()
	tree := upstream.TreeT(t, "v26.7.0")
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1}})
	helm3, err := helm3CLI()
	if err != nil {
		t.Fatal(err)
	}
	code, out := helmBin(t, c, helm3, "install", "gpu-operator", filepath.Join(tree, "deployments", "gpu-operator"),
		"-n", "gpu-operator", "--create-namespace", "--set", "driver.enabled=false", "--timeout", "5m")
	if code != 0 {
		t.Fatalf("helm v3 install of NVIDIA's chart exited %d:\n%s", code, out)
	}
	assertReconciled(t, c, "cluster-policy")
	waitGPUPresent(t, c)
	const nfdWorker = "gpu-operator-node-feature-discovery-worker"
	ds, err := c.Kube.AppsV1().DaemonSets("gpu-operator").Get(t.Context(), nfdWorker, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("NVIDIA's chart runs no NFD worker: %v", err)
	}
	nfdWorkerUID := ds.UID

	t.Run("install refuses a release of gpuctl's name that gpuctl did not install, and changes nothing", func(t *testing.T) {
		hist, values, before := history(t, c, "gpu-operator"), userValues(t, c), stackState(t, c)
		for _, args := range [][]string{{"install"}, {"install", "--dry-run"}, {"uninstall", "--yes"}, {"uninstall", "--dry-run"}} {
			code, _, stderr := gpuctl(t, c, args...)
			if code != cli.ExitPreflight {
				t.Errorf("gpuctl %v exited %d, want %d:\n%s", args, code, cli.ExitPreflight, stderr)
			}
			if !strings.Contains(stderr, "gpu-operator/gpu-operator") || !strings.Contains(stderr, "--adopt") {
				t.Errorf("gpuctl %v does not name the release and --adopt:\n%s", args, stderr)
			}
		}
		if got := history(t, c, "gpu-operator"); got != hist {
			t.Errorf("the release's history changed:\n%s\nwas\n%s", got, hist)
		}
		if got := userValues(t, c); got != values {
			t.Errorf("the release's values changed: %s, were %s", got, values)
		}
		assertUnchanged(t, before, stackState(t, c))
		if rec, err := record.Read(t.Context(), c.Kube); err != nil || rec != nil {
			t.Errorf("an install record was written (%v): %+v", err, rec)
		}
	})

	t.Run("install --adopt --dry-run lists what is kept and what changes", func(t *testing.T) {
		before := stackState(t, c)
		code, stdout, stderr := gpuctl(t, c, "install", "--adopt", "--dry-run", "-o", "json")
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, stderr)
		}
		var p struct {
			Adoption *struct {
				Release     string   `json:"release"`
				Kept        []string `json:"kept"`
				NFDSubchart bool     `json:"nfdSubchart"`
				Changes     []struct {
					Key string `json:"key"`
				} `json:"changes"`
			} `json:"adoption"`
		}
		if err := json.Unmarshal([]byte(stdout), &p); err != nil {
			t.Fatal(err)
		}
		if p.Adoption == nil || p.Adoption.Release != "gpu-operator" || !p.Adoption.NFDSubchart {
			t.Fatalf("adoption %+v", p.Adoption)
		}
		if !strings.Contains(strings.Join(p.Adoption.Kept, ","), "driver.enabled") {
			t.Errorf("kept %v lacks driver.enabled", p.Adoption.Kept)
		}
		t.Logf("changes: %+v", p.Adoption.Changes)
		assertUnchanged(t, before, stackState(t, c))
	})

	t.Run("install --adopt takes it over, keeping its values, and the real controller reconciles", func(t *testing.T) {
		res, _ := installJSON(t, c, "--adopt")
		if res.Plan == nil || res.Plan.Adoption == nil {
			t.Fatal("the install's plan has no adoption")
		}
		hist := releaseHistory(t, c, "gpu-operator")
		if n := len(hist); n != 2 {
			t.Fatalf("release gpu-operator has %d revisions, want 2 (NVIDIA's, then gpuctl's upgrade)", n)
		}
		if got := fmt.Sprint(nested(hist[1].Values, "driver", "enabled")); got != "false" {
			t.Errorf("gpuctl's revision has driver.enabled=%s, want the adopted false (values %v)", got, hist[1].Values)
		}
		// NFD, NVIDIA's subchart, runs on untouched, outside any release: the same worker DaemonSet (its
		// NodeFeatures would go with it), kept by Helm's resource policy; no NFD of gpuctl's beside it.
		if nfd := releaseHistory(t, c, "node-feature-discovery"); len(nfd) != 0 {
			t.Errorf("gpuctl installed an NFD of its own beside the subchart's: %d revisions", len(nfd))
		}
		ds, err := c.Kube.AppsV1().DaemonSets("gpu-operator").Get(t.Context(), nfdWorker, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the subchart's NFD worker is gone: %v", err)
		}
		if ds.UID != nfdWorkerUID || ds.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("NFD worker UID %s (was %s), annotations %v: want the same DaemonSet, kept", ds.UID, nfdWorkerUID, ds.Annotations)
		}
		waitGPUPresent(t, c)
		assertReconciled(t, c, "cluster-policy")
		rec, err := record.Read(t.Context(), c.Kube)
		if err != nil || rec == nil {
			t.Fatalf("no install record (%v)", err)
		}
		if r := rec.Release("gpu-operator"); r == nil || !r.Adopted || r.Created {
			t.Errorf("the record's release %+v: want adopted, not created", r)
		}
		if rec.Inputs.Adopted == nil || nested(rec.Inputs.Adopted.Values, "driver", "enabled") != false {
			t.Errorf("the record does not keep the adopted values: %+v", rec.Inputs.Adopted)
		}
		again := assertRerunChangesNothing(t, c, nil)
		if again.Plan != nil && again.Plan.Adoption != nil {
			t.Errorf("the rerun adopted again: %+v", again.Plan.Adoption)
		}
		if code, st := statusJSON(t, c, healthyWait()...); code != 0 {
			t.Errorf("status exited %d: %+v", code, st)
		}
	})
}

// waitGPUPresent waits until every simulated GPU node carries nvidia.com/gpu.present=true, as the
// operator labels a node NFD found an NVIDIA PCI device on.
func waitGPUPresent(t *testing.T, c *sandbox.Cluster) {
	t.Helper()
	gpus := simulatedGPUNodes(c)
	waitUntil(t, 3*time.Minute, "the GPU nodes are labelled nvidia.com/gpu.present=true", func(ctx context.Context) (bool, error) {
		nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		present := map[string]string{}
		for _, n := range nodes.Items {
			present[n.Name] = n.Labels["nvidia.com/gpu.present"]
		}
		for _, g := range gpus {
			if present[g] != "true" {
				return false, fmt.Errorf("node %s: nvidia.com/gpu.present=%q", g, present[g])
			}
		}
		return true, nil
	})
}

// userValues are the values of release gpu-operator's newest revision, as `helm get values` prints them.
func userValues(t *testing.T, c *sandbox.Cluster) string {
	t.Helper()
	data, err := json.Marshal(helmRelease(t, c, "gpu-operator").Values)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// stackState is clusterState without the workloads, whose status the running controllers keep
// writing, plus each workload's generation, which only a change of its spec moves.
func stackState(t *testing.T, c *sandbox.Cluster) map[string]string {
	t.Helper()
	state := clusterState(t, c)
	for k := range state {
		if strings.HasPrefix(k, "deployments/") || strings.HasPrefix(k, "daemonsets/") {
			delete(state, k)
		}
	}
	deps, err := c.Kube.AppsV1().Deployments("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps.Items {
		state["deployment-generation/"+d.Namespace+"/"+d.Name] = fmt.Sprint(d.Generation)
	}
	dss, err := c.Kube.AppsV1().DaemonSets("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dss.Items {
		state["daemonset-generation/"+d.Namespace+"/"+d.Name] = fmt.Sprint(d.Generation)
	}
	return state
}

// nested is the value at path in values (nil if absent).
func nested(values map[string]any, path ...string) any {
	var v any = values
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}
