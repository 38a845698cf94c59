package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpuctl/gpuctl/charts"
	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/health"
)

// Our charts are ordinary Helm charts: `helm install` of each, from a directory as a person would
// check them out, installs their CRDs from crds/ and the workloads, and the real operator reconciles
// the ClusterPolicy — without gpuctl.
func TestChartsInstallWithPlainHelm(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1}})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	const ns = "nvidia"
	for _, name := range charts.Names() {
		helmInstall(t, c, ns, name, name)
	}
	w := &health.Waiter{Kube: c.Kube, Dynamic: dynamicClient(t, c), Namespace: ns}
	if err := w.ClusterPolicyReady(ctx, "cluster-policy"); err != nil {
		t.Fatalf("after plain helm installs: %v", err)
	}
	if got := c.OperatorNamespace(); got != ns {
		t.Errorf("the operator runs for namespace %q, want %q", got, ns)
	}
}

// Helm's CLI and gpuctl work on the same releases, in any order: Helm rolls back, upgrades and
// uninstalls what gpuctl installed, without --force-conflicts, and gpuctl carries on from whatever
// Helm left — a failed revision is upgraded, never uninstalled. Helm 3 users too: the same story runs
// with Helm v4's CLI, then Helm v3's, on one sandbox (each ends with a fresh install, where the next
// begins).
func TestHelmCLIOnGpuctlReleases(t *testing.T) {
	t.Parallel()
	clis := []struct {
		name string
		bin  func() (string, error)
	}{{"helm v4", helmCLI}, {"helm v3", helm3CLI}}
	bins := map[string]string{}
	for _, h := range clis {
		bin, err := h.bin()
		if err != nil {
			t.Fatal(err)
		}
		bins[h.name] = bin
	}
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 1}})
	if code, _, stderr := gpuctl(t, c, "install"); code != 0 {
		t.Fatalf("gpuctl install exited %d:\n%s", code, stderr)
	}
	for _, h := range clis {
		if !t.Run(h.name, func(t *testing.T) { helmStory(t, c, bins[h.name]) }) {
			return // the next story starts where this one ended
		}
	}
}

// helmStory is TestHelmCLIOnGpuctlReleases with the Helm CLI bin, from a fresh gpuctl install to
// another.
func helmStory(t *testing.T, c *sandbox.Cluster, bin string) {
	const op = "gpu-operator"
	uid := clusterPolicyUID(t, c)
	dir := chartDir(t, op)
	helm := func(t *testing.T, args ...string) (int, string) {
		t.Helper()
		return helmBin(t, c, bin, args...)
	}

	story(t,
		step{"helm list and helm history show gpuctl's releases, and list selects them by gpuctl's label", func(t *testing.T) {
			code, out := helm(t, "list", "-n", "gpu-operator", "--selector", detect.ManagedReleaseLabel+"=true", "-o", "json")
			var list []struct{ Name, Status, Revision string }
			if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil {
				t.Fatalf("helm list exited %d (%v): %s", code, err, out)
			}
			got := map[string]string{}
			for _, r := range list {
				got[r.Name] = r.Status + " " + r.Revision
			}
			for _, name := range []string{op, "node-feature-discovery"} {
				if got[name] != "deployed 1" {
					t.Errorf("helm list: %s is %q, want deployed revision 1 (%v)", name, got[name], got)
				}
			}
			code, out = helm(t, "history", op, "-n", "gpu-operator", "-o", "json")
			var hist []struct {
				Revision int
				Status   string
			}
			if err := json.Unmarshal([]byte(out), &hist); code != 0 || err != nil || len(hist) != 1 || hist[0].Status != "deployed" {
				t.Errorf("helm history exited %d (%v): %s", code, err, out)
			}
		}},

		step{"a gpuctl upgrade takes over fields an older gpuctl left under its own field manager", func(t *testing.T) {
			// Releases an older gpuctl wrote are owned by field manager "gpuctl" (Helm's SDK names the
			// manager after the program); a field it holds with another value conflicts with this upgrade.
			old := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "apps/v1", "kind": "Deployment",
				"metadata": map[string]any{"name": "gpu-operator", "namespace": "gpu-operator"},
				"spec":     map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": map[string]any{"team": "old"}}}},
			}}
			deployments := dynamicClient(t, c).Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace("gpu-operator")
			if _, err := deployments.Apply(t.Context(), "gpu-operator", old, metav1.ApplyOptions{FieldManager: "gpuctl", Force: true}); err != nil {
				t.Fatal(err)
			}
			if code, _, stderr := gpuctl(t, c, "install", "--set", "operator.annotations.team=ml"); code != 0 {
				t.Fatalf("gpuctl install --set exited %d:\n%s", code, stderr)
			}
			if got := history(t, c, op); got != "1:superseded 2:deployed" {
				t.Fatalf("after the gpuctl upgrade: %s", got)
			}
			d, err := deployments.Get(t.Context(), "gpu-operator", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got, _, _ := unstructured.NestedString(d.Object, "spec", "template", "metadata", "annotations", "team"); got != "ml" {
				t.Errorf("annotation team = %q, want ml", got)
			}
		}},

		step{"helm rollback after a gpuctl upgrade succeeds without --force-conflicts", func(t *testing.T) {
			if code, out := helm(t, "rollback", op, "1", "-n", "gpu-operator"); code != 0 {
				t.Fatalf("helm rollback exited %d: %s", code, out)
			}
			if got := history(t, c, op); got != "1:superseded 2:superseded 3:deployed" {
				t.Errorf("after helm rollback: %s", got)
			}
		}},

		step{"helm upgrade --reuse-values of a gpuctl release with gpuctl's chart works", func(t *testing.T) {
			if code, out := helm(t, "upgrade", op, dir, "--reuse-values", "-n", "gpu-operator"); code != 0 {
				t.Fatalf("helm upgrade exited %d: %s", code, out)
			}
			if got := history(t, c, op); !strings.HasSuffix(got, "4:deployed") {
				t.Errorf("after helm upgrade: %s", got)
			}
			code, out := helm(t, "get", "values", op, "-n", "gpu-operator", "-o", "json")
			if code != 0 || !strings.Contains(out, `"nfd":{"enabled":false}`) {
				t.Errorf("the values gpuctl chose were not reused: %s", out)
			}
		}},

		step{"after a failed helm upgrade gpuctl install upgrades the release, never reinstalls it", func(t *testing.T) {
			// An annotation key the API server refuses (more than one "/") passes Helm's client-side
			// checks, so Helm stores the revision and marks it failed, as any upgrade the cluster refuses.
			code, out := helm(t, "upgrade", op, dir, "--reuse-values", "-n", "gpu-operator", "--set", "operator.annotations.not/a/key=x")
			if code == 0 {
				t.Fatalf("helm upgrade with a bad annotation succeeded: %s", out)
			}
			if got := history(t, c, op); !strings.HasSuffix(got, "5:failed") {
				t.Fatalf("after the failed helm upgrade: %s, want revision 5 failed", got)
			}
			code, _, stderr := gpuctl(t, c, "install")
			if code != 0 {
				t.Fatalf("gpuctl install exited %d:\n%s", code, stderr)
			}
			for _, bad := range []string{"reinstalled", "removed it"} {
				if strings.Contains(stderr, bad) {
					t.Errorf("gpuctl said %q:\n%s", bad, stderr)
				}
			}
			if got := history(t, c, op); got != "1:superseded 2:superseded 3:superseded 4:superseded 5:failed 6:deployed" {
				t.Errorf("history %s: want every revision kept and 6 deployed", got)
			}
			if got := clusterPolicyUID(t, c); got != uid {
				t.Errorf("ClusterPolicy UID %s, was %s: it was deleted and created again", got, uid)
			}
		}},

		step{"a gpuctl install after that changes nothing", func(t *testing.T) {
			res, _ := installJSON(t, c)
			if res.Changed {
				t.Errorf("changed: %+v", res.Steps)
			}
			if got := history(t, c, op); !strings.HasSuffix(got, "6:deployed") {
				t.Errorf("history %s", got)
			}
		}},

		step{"helm uninstall of gpuctl's releases works, and gpuctl installs them again cleanly", func(t *testing.T) {
			for _, name := range []string{op, "node-feature-discovery"} {
				if code, out := helm(t, "uninstall", name, "-n", "gpu-operator"); code != 0 {
					t.Fatalf("helm uninstall %s exited %d: %s", name, code, out)
				}
				if got := history(t, c, name); got != "" {
					t.Errorf("history of %s after helm uninstall: %s", name, got)
				}
			}
			res, _ := installJSON(t, c)
			for _, r := range res.Releases {
				if r.Revision != 1 || r.Status != "deployed" {
					t.Errorf("release %s: %s revision %d", r.Name, r.Status, r.Revision)
				}
			}
			assertReconciled(t, c, "cluster-policy")
		}},
	)
}
