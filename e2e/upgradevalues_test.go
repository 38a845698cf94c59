package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/preflight"
)

// upgradeValuesFile sets a key no release of the catalog reads any more (NVIDIA replaced
// driver.useOpenKernelModules with driver.kernelModuleType) and one v25.10.1 reads and v26.7.0 does
// not (the default NVIDIADriver's nodeSelector).
const upgradeValuesFile = `driver:
  useOpenKernelModules: true
  nvidiaDriverCRD:
    nodeSelector:
      team: gpu
`

// TestUpgradeWarnsBeforeItBreaks: a stack installed at v25.10.1 with values v26.7.0 does not read.
// check --pre and the upgrade's preview name those keys (and NVIDIA's replacement) and the defaults
// that change; upgrade --yes without --accept-value-changes is refused before anything is written;
// status names a GPU node whose driver upgrade failed, with NVIDIA's way out, and exits 4.
func TestUpgradeWarnsBeforeItBreaks(t *testing.T) {
	t.Parallel()
	s := cleanSandbox(t, day2Scenario)
	c := s.Cluster
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(upgradeValuesFile), 0o600); err != nil {
		t.Fatal(err)
	}
	installJSON(t, c, "--operator-version", "v25.10.1", "-f", values)

	t.Run("check --pre --operator-version v26.7.0 warns about the values, as upgrade would list them", func(t *testing.T) {
		code, stdout, stderr := gpuctl(t, c, "check", "--pre", "--operator-version", "v26.7.0", "-o", "json")
		if code == cli.ExitUsage {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var rep preflight.Report
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("%v\n%s", err, stdout)
		}
		i := slices.IndexFunc(rep.Results, func(r preflight.Result) bool { return r.ID == "upgrade-values" })
		if i < 0 {
			t.Fatalf("no upgrade-values result in %+v", rep.Results)
		}
		r := rep.Results[i]
		for _, want := range []string{"driver.useOpenKernelModules: v26.7.0 does not read it; NVIDIA replaced it with driver.kernelModuleType",
			"driver.nvidiaDriverCRD.nodeSelector.team: v26.7.0 no longer reads it (v25.10.1 did)", "ccManager.enabled: default changes from false to true"} {
			if r.Status != preflight.StatusWarn || !strings.Contains(r.Message, want) {
				t.Errorf("%s: %q not in %q", r.Status, want, r.Message)
			}
		}
	})

	t.Run("the upgrade's preview names the keys v26.7.0 does not read, NVIDIA's replacement and the changed defaults", func(t *testing.T) {
		dry := upgradeJSON(t, c, "--operator-version", "v26.7.0", "--dry-run")
		v := dry.Preview.Values
		if v == nil {
			t.Fatalf("no values in the preview %+v", dry.Preview)
		}
		want := map[string]bundle.UnreadKey{
			"driver.useOpenKernelModules":              {Key: "driver.useOpenKernelModules", Replacement: "driver.kernelModuleType"},
			"driver.nvidiaDriverCRD.nodeSelector.team": {Key: "driver.nvidiaDriverCRD.nodeSelector.team", ReadBefore: true},
		}
		got := map[string]bundle.UnreadKey{}
		for _, k := range v.NotRead {
			k.Evidence = ""
			got[k.Key] = k
		}
		if !maps.Equal(got, want) {
			t.Errorf("not read %+v, want %+v", got, want)
		}
		defaults := map[string]bool{}
		for _, d := range v.ChangedDefaults {
			defaults[d.Key] = true
		}
		for _, k := range []string{"ccManager.enabled", "ccManager.defaultMode", "dcgmExporter.serviceMonitor.enabled"} {
			if !defaults[k] {
				t.Errorf("changed defaults %+v lack %s", v.ChangedDefaults, k)
			}
		}
		code, stdout, _ := gpuctl(t, c, "upgrade", "--operator-version", "v26.7.0", "--dry-run")
		if code != 0 || !strings.Contains(stdout, "NVIDIA replaced it with driver.kernelModuleType") || !strings.Contains(stdout, "ccManager.enabled: default changes from false to true") {
			t.Errorf("exit %d, text preview:\n%s", code, stdout)
		}
	})

	t.Run("upgrade --yes without --accept-value-changes is refused before anything is written", func(t *testing.T) {
		before, leaseBefore, rev := clusterState(t, c), leaseVersion(t, c), helmRelease(t, c, "gpu-operator").Revision
		code, _, stderr := gpuctl(t, c, "upgrade", "--operator-version", "v26.7.0", "--yes")
		if code != cli.ExitUsage {
			t.Errorf("exit %d, want %d:\n%s", code, cli.ExitUsage, stderr)
		}
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if last := lines[len(lines)-1]; !strings.Contains(last, "--accept-value-changes") || !strings.Contains(last, "Nothing was changed") {
			t.Errorf("last line %q", last)
		}
		if !strings.Contains(stderr, "driver.useOpenKernelModules") {
			t.Errorf("stderr does not name the key:\n%s", stderr)
		}
		if got := helmRelease(t, c, "gpu-operator").Revision; got != rev {
			t.Errorf("gpu-operator revision %d → %d after a refused upgrade", rev, got)
		}
		if got := leaseVersion(t, c); got != leaseBefore {
			t.Errorf("the refused upgrade wrote the lock's Lease (%q → %q)", leaseBefore, got)
		}
		if after := clusterState(t, c); !maps.Equal(before, after) {
			t.Errorf("the refused upgrade changed the cluster")
		}
	})

	// Last: it stops the operator (the next test's cleanSandbox uninstalls the stack).
	t.Run("status names a GPU node in upgrade-failed with NVIDIA's way out and exits 4", func(t *testing.T) {
		ctx := t.Context()
		// NVIDIA's upgrade controller moves a node out of upgrade-failed once its driver pod is in sync, which
		// the sandbox's simulated driver pods are: the operator is stopped so the label stays as a stuck
		// node's would.
		if _, err := c.Kube.AppsV1().Deployments("gpu-operator").Patch(ctx, "gpu-operator", types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, time.Minute, "the operator's pods are gone", func(ctx context.Context) (bool, error) {
			pods, err := c.Kube.CoreV1().Pods("gpu-operator").List(ctx, metav1.ListOptions{LabelSelector: "app=gpu-operator"})
			return err == nil && len(pods.Items) == 0, err
		})
		node := simulatedGPUNodes(c)[0]
		patch := `{"metadata":{"labels":{"` + health.DriverUpgradeStateLabel + `":"upgrade-failed"}}}`
		if _, err := c.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		code, res := statusJSON(t, c)
		if code != cli.ExitNotReady || res.Healthy {
			t.Errorf("exit %d, healthy %v; want %d", code, res.Healthy, cli.ExitNotReady)
		}
		i := slices.IndexFunc(res.Checks, func(c engine.StatusCheck) bool { return c.Name == "driver upgrades" })
		if i < 0 {
			t.Fatalf("no driver upgrades check in %+v", res.Checks)
		}
		chk := res.Checks[i]
		if chk.State != engine.CheckFailed || !strings.Contains(chk.Message, node) || !strings.Contains(chk.Message, "upgrade-failed") ||
			!strings.Contains(chk.Hint, "delete the node's driver pod") || !strings.Contains(chk.Hint, "gpu-driver-upgrades.html") {
			t.Errorf("check %+v", chk)
		}
		_, stdout, _ := gpuctl(t, c, "status")
		if !strings.Contains(stdout, node) || !strings.Contains(stdout, "upgrade-failed") {
			t.Errorf("text status does not name %s:\n%s", node, stdout)
		}
	})
}
