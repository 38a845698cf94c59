package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
)

var helmReleases = schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}

// TestFluxInstallsTheExport is the GitOps story on Flux's real controllers: gpuctl pushes its charts to
// a real OCI registry and exports the plan for Flux; applying the export is all the user does; Flux's
// source-controller and helm-controller install NFD, the CRDs and the operator in gpuctl's order, and
// NVIDIA's real v26.7.0 controller reconciles the ClusterPolicy. Day 2 is a re-export: a changed
// --set, applied, is rolled out by Flux, and so is --sharing time-slicing=4, giving each GPU node the
// allocatable GPUs gpuctl's own install with that flag gives them once Flux's releases are deleted;
// while Flux owns the releases, gpuctl's own upgrade refuses them.
func TestFluxInstallsTheExport(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "gke", GPUNodes: 2, CPUNodes: 1}, GitOps: sandbox.GitOpsFlux})
	repo := "oci://" + c.RegistryHost + "/gpuctl"
	dir := t.TempDir()
	exported := func(t *testing.T, extra ...string) []*unstructured.Unstructured {
		t.Helper()
		out := filepath.Join(dir, fmt.Sprint(len(extra)))
		args := append([]string{"export", "--for", "flux", "--chart-repo", repo, "--plain-http", "-o", out}, extra...)
		if code, _, stderr := gpuctl(t, c, args...); code != 0 {
			t.Fatalf("gpuctl %s exited %d: %s", strings.Join(args, " "), code, stderr)
		}
		files, err := filepath.Glob(filepath.Join(out, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("the export wrote no files to %s: %v", out, err)
		}
		var docs []*unstructured.Unstructured
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, decodeStream(t, string(b))...)
		}
		return docs
	}
	apply := func(t *testing.T, docs []*unstructured.Unstructured) {
		t.Helper()
		dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
		if err != nil {
			t.Fatal(err)
		}
		mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
		for _, d := range docs {
			if err := serverSideApply(t.Context(), dynamicClient(t, c), mapper, d, false); err != nil {
				t.Fatalf("apply %s %s/%s: %v", d.GetKind(), d.GetNamespace(), d.GetName(), err)
			}
		}
	}
	// revision is the Helm release Flux last installed or upgraded, once its HelmRelease is Ready
	// for the generation applied last (0 before).
	revision := func(ctx context.Context, name string) (int64, error) {
		hr, err := dynamicClient(t, c).Resource(helmReleases).Namespace("gpu-operator").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		var ready bool
		conds, _, _ := unstructured.NestedSlice(hr.Object, "status", "conditions")
		for _, cnd := range conds {
			m, _ := cnd.(map[string]any)
			observed, _, _ := unstructured.NestedInt64(m, "observedGeneration")
			if m["type"] == "Ready" && m["status"] == "True" && observed == hr.GetGeneration() {
				ready = true
			}
		}
		history, _, _ := unstructured.NestedSlice(hr.Object, "status", "history")
		if !ready || len(history) == 0 {
			return 0, fmt.Errorf("HelmRelease %s not ready: %v", name, conds)
		}
		v, _, _ := unstructured.NestedInt64(history[0].(map[string]any), "version")
		return v, nil
	}

	var fluxShared map[string]int64 // each GPU node's allocatable nvidia.com/gpu with Flux's --sharing export

	story(t,
		step{"gpuctl charts push puts every chart the export names into the registry", func(t *testing.T) {
			if code, stdout, stderr := gpuctl(t, c, "charts", "push", repo, "--plain-http"); code != 0 {
				t.Fatalf("charts push exited %d: %s%s", code, stdout, stderr)
			}
		}},
		step{"applied, the export is installed by Flux in gpuctl's order and the real operator reconciles it", func(t *testing.T) {
			docs := exported(t)
			var kinds []string
			for _, d := range docs {
				kinds = append(kinds, d.GetKind()+"/"+d.GetName())
			}
			// On GKE's COS nodes gpuctl installs Google's driver installer between NFD and the operator.
			releases := []string{"node-feature-discovery", "gke-driver-installer-cos", "gpu-operator"}
			want := []string{"Namespace/gpu-operator", "ResourceQuota/gpu-operator-quota", "HelmRepository/gpuctl-charts"}
			for _, r := range releases {
				want = append(want, "HelmRelease/"+r)
			}
			if !slices.Equal(kinds, want) {
				t.Fatalf("the export holds %v, want %v", kinds, want)
			}
			apply(t, docs)
			waitUntil(t, 5*time.Minute, "Flux installed every release", func(ctx context.Context) (bool, error) {
				for _, name := range releases {
					if v, err := revision(ctx, name); v != 1 || err != nil {
						return false, err
					}
				}
				return true, nil
			})
			for i := 1; i < len(releases); i++ {
				before, after := helmRelease(t, c, releases[i-1]), helmRelease(t, c, releases[i])
				if !after.Updated.After(before.Updated) {
					t.Errorf("%s was installed at %s, before %s at %s: dependsOn did not order them", after.Name, after.Updated, before.Name, before.Updated)
				}
			}
			operator := helmRelease(t, c, "gpu-operator")
			if operator.ChartVersion != "26.7.0" || operator.Status != "deployed" {
				t.Errorf("Flux installed gpu-operator %s (%s), want 26.7.0 deployed", operator.ChartVersion, operator.Status)
			}
			if !slices.Contains(crdNames(t, c), "clusterpolicies.nvidia.com") {
				t.Error("Flux did not install the ClusterPolicy CRD from the chart's crds/")
			}
			waitUntil(t, 5*time.Minute, "NVIDIA's controller reconciled the ClusterPolicy", func(ctx context.Context) (bool, error) {
				cp, err := dynamicClient(t, c).Resource(clusterPolicies).Get(ctx, "cluster-policy", metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				// "ready" with reason NoGPUNodes comes first when the operator starts before NFD's
				// workers have labelled the GPU nodes.
				state, _, _ := unstructured.NestedString(cp.Object, "status", "state")
				conds, _, _ := unstructured.NestedSlice(cp.Object, "status", "conditions")
				for _, cnd := range conds {
					if m, _ := cnd.(map[string]any); m["type"] == "Ready" && m["reason"] == "Reconciled" && m["status"] == "True" {
						return state == "ready", nil
					}
				}
				return false, nil
			})
			assertReconciled(t, c, "cluster-policy")
			assertRealController(t, c, "v26.7.0")
		}},
		step{"gpuctl status reads the stack Flux installed as healthy", func(t *testing.T) {
			waitUntil(t, 5*time.Minute, "gpuctl status exits 0", func(context.Context) (bool, error) {
				code, res := statusJSON(t, c)
				if code != 0 {
					return false, fmt.Errorf("status exited %d: %+v", code, res.Checks)
				}
				if rc := res.Checks[0]; !strings.Contains(rc.Message, "managed by Flux HelmRelease gpu-operator/") {
					t.Errorf("status's %s check does not name Flux's HelmRelease: %+v", rc.Name, rc)
				}
				return true, nil
			})
		}},
		step{"a changed --set, re-exported and applied, is rolled out by Flux", func(t *testing.T) {
			apply(t, exported(t, "--set", "daemonsets.labels.team=gpu"))
			waitUntil(t, 5*time.Minute, "Flux upgraded the operator's release", func(ctx context.Context) (bool, error) {
				v, err := revision(ctx, "gpu-operator")
				return v == 2, err
			})
			cp, err := dynamicClient(t, c).Resource(clusterPolicies).Get(t.Context(), "cluster-policy", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if team, _, _ := unstructured.NestedString(cp.Object, "spec", "daemonsets", "labels", "team"); team != "gpu" {
				t.Errorf("ClusterPolicy spec.daemonsets.labels.team = %q after Flux's upgrade, want gpu", team)
			}
			for _, name := range []string{"node-feature-discovery", "gke-driver-installer-cos"} {
				if v, err := revision(t.Context(), name); v != 1 || err != nil {
					t.Errorf("%s is at revision %d (%v), want 1: its values did not change", name, v, err)
				}
			}
		}},
		step{"the export with --sharing time-slicing=4, applied, is rolled out by Flux and every GPU node advertises 4 per GPU", func(t *testing.T) {
			apply(t, exported(t, "--set", "daemonsets.labels.team=gpu", "--sharing", "time-slicing=4"))
			waitUntil(t, 5*time.Minute, "Flux upgraded the operator's release", func(ctx context.Context) (bool, error) {
				v, err := revision(ctx, "gpu-operator")
				return v == 3, err
			})
			fluxShared = waitAllocatable(t, c, "the GPU nodes advertise 4 per GPU", func(node string) int64 { return 4 * gpusOf(c, node) })
		}},
		step{"gpuctl upgrade, install and uninstall refuse the releases Flux owns, naming the HelmRelease, and change nothing", func(t *testing.T) {
			before := history(t, c, "gpu-operator")
			for _, args := range [][]string{
				{"upgrade", "--yes", "--set", "daemonsets.labels.team=ml"},
				{"install"},
				{"uninstall", "--yes"},
			} {
				code, _, stderr := gpuctl(t, c, args...)
				if code != 5 || !strings.Contains(stderr, "is managed by Flux HelmRelease gpu-operator/") {
					t.Errorf("gpuctl %s exited %d, want 5 naming the HelmRelease: %s", args[0], code, stderr)
				}
			}
			if after := history(t, c, "gpu-operator"); after != before {
				t.Errorf("the release's history changed:\nbefore %s\nafter  %s", before, after)
			}
		}},
		step{"with Flux's releases deleted, gpuctl install --sharing time-slicing=4 gives the GPU nodes the allocatable Flux's export gave", func(t *testing.T) {
			hrs := dynamicClient(t, c).Resource(helmReleases).Namespace("gpu-operator")
			if err := hrs.DeleteCollection(t.Context(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, 5*time.Minute, "Flux uninstalled its releases", func(ctx context.Context) (bool, error) {
				left, err := hrs.List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, err
				}
				stored, err := c.Kube.CoreV1().Secrets("gpu-operator").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
				return err == nil && len(left.Items) == 0 && len(stored.Items) == 0, err
			})
			waitAllocatable(t, c, "no GPU node advertises a GPU once the device plugin is gone", func(string) int64 { return 0 })
			installJSON(t, c, "--sharing", "time-slicing=4")
			waitAllocatable(t, c, "the GPU nodes advertise what Flux's export made them advertise", func(node string) int64 { return fluxShared[node] })
		}},
	)
}

// waitAllocatable waits until every simulated GPU node's allocatable nvidia.com/gpu is want(node), and
// returns them by node.
func waitAllocatable(t *testing.T, c *sandbox.Cluster, what string, want func(node string) int64) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	waitUntil(t, 5*time.Minute, what, func(ctx context.Context) (bool, error) {
		for _, name := range simulatedGPUNodes(c) {
			n, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			q := n.Status.Allocatable["nvidia.com/gpu"]
			if got[name] = q.Value(); got[name] != want(name) {
				return false, nil
			}
		}
		return true, nil
	})
	return got
}
