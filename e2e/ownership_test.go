package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
)

// TestOwnershipRespected: once a GitOps engine manages the operator's release (its objects carry Flux
// helm-controller's origin labels, or Argo CD's tracking annotation, exactly as each engine writes
// them), gpuctl install, upgrade and uninstall refuse before their first write with exit 5, naming the
// engine's object to change instead, and change nothing; gpuctl status reports as before.
func TestOwnershipRespected(t *testing.T) {
	t.Parallel()
	s := cleanSandbox(t, day2Scenario)
	c := s.Cluster
	installJSON(t, c)
	statusBefore, _ := statusJSON(t, c)

	for _, engine := range []struct {
		name string
		// mark is the metadata the engine writes on an object of the release: a merge patch of
		// metadata (nil values remove it again).
		mark  func(obj *unstructured.Unstructured, remove bool) map[string]any
		owner string
	}{
		{
			// Flux helm-controller v1.4.0 labels every object it renders with the HelmRelease's name and
			// namespace (internal/postrender/common_renderer.go, originLabels).
			name:  "Flux",
			owner: "Flux HelmRelease flux-system/gpu-operator",
			mark: func(_ *unstructured.Unstructured, remove bool) map[string]any {
				name, ns := any("gpu-operator"), any("flux-system")
				if remove {
					name, ns = nil, nil
				}
				return map[string]any{"labels": map[string]any{"helm.toolkit.fluxcd.io/name": name, "helm.toolkit.fluxcd.io/namespace": ns}}
			},
		},
		{
			// Argo CD v3 tracks what it applies by the annotation argocd.argoproj.io/tracking-id,
			// "<app>:<group>/<kind>:<namespace>/<name>" (util/argo/resource_tracking.go).
			name:  "Argo CD",
			owner: "Argo CD Application gpu-operator",
			mark: func(obj *unstructured.Unstructured, remove bool) map[string]any {
				gvk := obj.GroupVersionKind()
				// A cluster-scoped object's is the Application's destination namespace.
				var id any = "gpu-operator:" + gvk.Group + "/" + gvk.Kind + ":gpu-operator/" + obj.GetName()
				if remove {
					id = nil
				}
				return map[string]any{"annotations": map[string]any{"argocd.argoproj.io/tracking-id": id}}
			},
		},
	} {
		t.Run("a release "+engine.name+" manages is refused by install, upgrade and uninstall", func(t *testing.T) {
			objs := releaseObjects(t, c, "gpu-operator")
			markObjects(t.Context(), t, c, objs, func(o *unstructured.Unstructured) map[string]any { return engine.mark(o, false) })
			t.Cleanup(func() { // the test's context is over by now
				markObjects(context.Background(), t, c, objs, func(o *unstructured.Unstructured) map[string]any { return engine.mark(o, true) })
			})
			hist, state := history(t, c, "gpu-operator"), clusterState(t, c)
			for _, args := range [][]string{
				{"upgrade", "--yes", "--set", "daemonsets.labels.owner=gpuctl"},
				{"uninstall", "--yes"},
				{"uninstall", "--dry-run"},
				{"install"},
				{"install", "--dry-run"},
			} {
				code, _, stderr := gpuctl(t, c, args...)
				if code != cli.ExitPreflight {
					t.Errorf("gpuctl %s: exit %d, want %d", strings.Join(args, " "), code, cli.ExitPreflight)
				}
				if !strings.Contains(stderr, "release gpu-operator/gpu-operator is managed by "+engine.owner) {
					t.Errorf("gpuctl %s does not name %s:\n%s", strings.Join(args, " "), engine.owner, stderr)
				}
			}
			if h := history(t, c, "gpu-operator"); h != hist {
				t.Errorf("Helm history changed: %s, was %s", h, hist)
			}
			assertUnchanged(t, state, clusterState(t, c))
			if code, _ := statusJSON(t, c); code != statusBefore {
				t.Errorf("status exits %d on a release %s manages, %d before", code, engine.name, statusBefore)
			}
		})
	}
}

// releaseObjects are the objects of a release's deployed manifest in the gpu-operator namespace, each
// with its resource.
func releaseObjects(t *testing.T, c *sandbox.Cluster, name string) []releaseObject {
	t.Helper()
	code, manifest := helm(t, c, "get", "manifest", name, "-n", "gpu-operator")
	if code != 0 {
		t.Fatalf("helm get manifest %s: exit %d", name, code)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var out []releaseObject
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("manifest of %s: %v", name, err)
		}
		if obj.Object == nil || obj.GetName() == "" {
			continue
		}
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatal(err)
		}
		if obj.GetNamespace() == "" && m.Scope.Name() == meta.RESTScopeNameNamespace {
			obj.SetNamespace("gpu-operator") // Helm's manifests leave the release's namespace out
		}
		out = append(out, releaseObject{obj: &obj, gvr: m.Resource})
	}
	if len(out) == 0 {
		t.Fatalf("release %s has no objects", name)
	}
	return out
}

type releaseObject struct {
	obj *unstructured.Unstructured
	gvr schema.GroupVersionResource
}

// markObjects merge-patches the metadata of objs, as an engine that took a release over writes it.
func markObjects(ctx context.Context, t *testing.T, c *sandbox.Cluster, objs []releaseObject, patch func(*unstructured.Unstructured) map[string]any) {
	t.Helper()
	dyn := dynamicClient(t, c)
	for _, o := range objs {
		body, err := json.Marshal(map[string]any{"metadata": patch(o.obj)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(o.gvr).Namespace(o.obj.GetNamespace()).Patch(ctx, o.obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			t.Fatalf("patch %s %s: %v", o.obj.GetKind(), o.obj.GetName(), err)
		}
	}
}
