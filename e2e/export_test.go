package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
	"github.com/gpuctl/gpuctl/internal/cli"
)

// exportScenario is a bare cluster: the exports are only dry-run, nothing of gpuctl's runs.
var exportScenario = sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 1}, NoOperator: true}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// TestExportValidatesAgainstEngineCRDs installs the GitOps engines' own CRDs, taken from their modules
// at the versions toolchain pins (never written by hand), and dry-runs every document of every export
// format on a few profiles against them, server-side with strict field validation: each is accepted.
// A document with a field its engine does not know is refused, so the check can fail.
func TestExportValidatesAgainstEngineCRDs(t *testing.T) {
	t.Parallel()
	s := cleanSandbox(t, exportScenario)
	c := s.Cluster
	ctx := t.Context()
	dyn := dynamicClient(t, c)

	// The engines' CRDs, created for real and removed when the test ends.
	var crds []string
	for _, engine := range []string{"argocd", "rke2", "flux"} {
		files, err := toolchain.EngineCRDFiles(ctx, toolchain.EngineCRDSources()[engine])
		if err != nil {
			t.Fatalf("the CRDs of %s: %v", engine, err)
		}
		for path, b := range files {
			var crd unstructured.Unstructured
			if err := sigsyaml.Unmarshal(b, &crd.Object); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if crd.GetKind() != "CustomResourceDefinition" {
				t.Fatalf("%s holds a %s, not a CRD", path, crd.GetKind())
			}
			if _, err := dyn.Resource(crdGVR).Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create CRD %s from %s: %v", crd.GetName(), path, err)
			}
			crds = append(crds, crd.GetName())
		}
	}
	t.Cleanup(func() {
		for _, name := range crds {
			_ = dyn.Resource(crdGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	waitUntil(t, 2*time.Minute, "the engines' CRDs are established", func(ctx context.Context) (bool, error) {
		for _, name := range crds {
			crd, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			established := false
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				established = established || (m["type"] == "Established" && m["status"] == "True")
			}
			if !established {
				return false, nil
			}
		}
		return true, nil
	})
	// Namespaced objects are dry-run into namespaces that exist: the install namespace (its exported
	// Namespace object is dry-run over it) and Argo CD's.
	for _, ns := range []string{"gpu-operator", "argocd"} {
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		})
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	waitUntil(t, time.Minute, "discovery serves the engines' kinds", func(context.Context) (bool, error) {
		mapper.Reset()
		for _, gk := range []schema.GroupKind{{Group: "argoproj.io", Kind: "ApplicationSet"}, {Group: "helm.cattle.io", Kind: "HelmChart"}, {Group: "helm.toolkit.fluxcd.io", Kind: "HelmRelease"}, {Group: "source.toolkit.fluxcd.io", Kind: "HelmRepository"}} {
			if _, err := mapper.RESTMapping(gk); err != nil {
				return false, err
			}
		}
		return true, nil
	})

	formats := [][]string{
		{"--for", "flux"},
		{"--for", "argocd"},
		{"--for", "argocd", "--fleet", "--cluster-selector", "gpuctl.io/fleet=gpu"},
		{"--for", "rke2"},
	}
	releaseKinds := map[string]bool{"HelmRelease": true, "Application": true, "ApplicationSet": true, "HelmChart": true}
	for _, format := range formats {
		for _, profile := range []string{"gke", "kubeadm", "tkgs"} {
			for _, repo := range []string{"https://charts.example.com/gpuctl", "oci://registry.example.com/gpuctl/charts"} {
				name := strings.Join(format[1:], " ") + " on " + profile + " from " + strings.SplitN(repo, ":", 2)[0]
				t.Run("export "+name+": every document passes a strict server-side dry run", func(t *testing.T) {
					args := append([]string{"export", "--profile", profile, "--chart-repo", repo}, format...)
					code, out, errOut := gpuctl(t, c, args...)
					if code != 0 {
						t.Fatalf("export exited %d: %s", code, errOut)
					}
					docs := decodeStream(t, out)
					seen := map[string]int{}
					for _, d := range docs {
						if err := dryRunApply(ctx, dyn, mapper, d); err != nil {
							t.Errorf("%s %s/%s refused: %v", d.GetKind(), d.GetNamespace(), d.GetName(), err)
						}
						seen[d.GetKind()]++
					}
					releases := 0
					for k, n := range seen {
						if releaseKinds[k] {
							releases += n
						}
					}
					if releases < 2 || seen["Namespace"] != 1 {
						t.Errorf("the export holds %v: want the namespace and a release object for NFD and the operator", seen)
					}
					if profile == "tkgs" && seen["RoleBinding"] != 1 {
						t.Errorf("the tkgs export holds no PodSecurityPolicy RoleBinding: %v", seen)
					}
					if profile == "gke" && seen["ResourceQuota"] != 1 {
						t.Errorf("the gke export holds no ResourceQuota: %v", seen)
					}
					// The negative control: the same release object with one field its engine does
					// not know is refused.
					for _, d := range docs {
						if !releaseKinds[d.GetKind()] {
							continue
						}
						bad := d.DeepCopy()
						if err := unstructured.SetNestedField(bad.Object, "x", "spec", "notAField"); err != nil {
							t.Fatal(err)
						}
						err := dryRunApply(ctx, dyn, mapper, bad)
						if err == nil || !strings.Contains(err.Error(), ".spec.notAField: field not declared in schema") {
							t.Errorf("%s %s with spec.notAField: err = %v, want it refused as an unknown field", d.GetKind(), d.GetName(), err)
						}
						break
					}
				})
			}
		}
	}
	t.Run("export --for capi is refused: its engine's CRDs are not served to validate against", func(t *testing.T) {
		code, out, errOut := gpuctl(t, c, "export", "--for", "capi", "--profile", "kubeadm", "--chart-repo", "https://charts.example.com")
		if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, "--for capi: not exported") {
			t.Errorf("exit %d, stdout %q, stderr %s", code, out, errOut)
		}
	})
}

// decodeStream splits an export's YAML stream into its objects.
func decodeStream(t *testing.T, stream string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("the export is not YAML: %v", err)
		}
		if obj != nil {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}

// dryRunApply applies obj server-side with dryRun=All and strict field validation.
func dryRunApply(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, obj *unstructured.Unstructured) error {
	return serverSideApply(ctx, dyn, mapper, obj, true)
}

// serverSideApply applies obj server-side with strict field validation, as `kubectl apply
// --server-side` does; with dryRun nothing is written.
func serverSideApply(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		r = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	opts := metav1.PatchOptions{FieldManager: "gpuctl-e2e-export", FieldValidation: "Strict", Force: ptr.To(true)}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = r.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts)
	return err
}
