package e2e

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/render"
)

// TestCRDsAreNeverNarrowedByAConstraint: another tool installed a CRD that differs from gpuctl's only
// in what ours would refuse or prune, and gpuctl keeps it and says why: ours adds a pattern; ours adds
// an x-kubernetes-validations rule; ours types a subtree it leaves open while a stored object would
// lose a field there or be refused. With no such object stored, ours replaces it.
func TestCRDsAreNeverNarrowedByAConstraint(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 0}, NoOperator: true})
	ctx := t.Context()
	ext := apiextensionsclient.NewForConfigOrDie(c.Config)
	dyn := dynamicClient(t, c)
	ours, _, err := render.ChartCRDs("gpu-operator", "")
	if err != nil {
		t.Fatal(err)
	}
	// The CRDs of every release gpuctl offers, as the install's CRD step passes them.
	releases := map[string][]*apiextensionsv1.CustomResourceDefinition{}
	for _, b := range bundle.List() {
		if releases[b.Version], _, err = render.ChartCRDs("gpu-operator", b.Version); err != nil {
			t.Fatal(err)
		}
	}
	crd := func(name string) *apiextensionsv1.CustomResourceDefinition {
		for _, c := range ours {
			if c.Name == name {
				return c.DeepCopy()
			}
		}
		t.Fatalf("no CRD %s in the gpu-operator chart", name)
		return nil
	}
	apply := func(t *testing.T, want *apiextensionsv1.CustomResourceDefinition) kube.CRDResult {
		t.Helper()
		res, err := (&kube.ApplyCRDs{Client: ext, Dynamic: dyn, CRDs: []*apiextensionsv1.CustomResourceDefinition{want}, Version: "v26.7.0", Releases: releases}).Run(ctx)
		if err != nil || len(res) != 1 {
			t.Fatalf("apply: %v %v", res, err)
		}
		t.Logf("%s: %s %s", res[0].Name, res[0].Action, res[0].Reason)
		return res[0]
	}
	installed := func(t *testing.T, name string) *apiextensionsv1.CustomResourceDefinition {
		t.Helper()
		got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	t.Run("a CRD without a pattern ours adds is kept, and the reason names the path", func(t *testing.T) {
		want := crd("clusterpolicies.nvidia.com")
		theirs := want.DeepCopy()
		interval := []string{"spec", "dcgmExporter", "serviceMonitor", "interval"}
		if propOf(want, interval...).Pattern == "" {
			t.Fatal("ours has no pattern on spec.dcgmExporter.serviceMonitor.interval any more: pick another")
		}
		editProp(theirs, func(s *apiextensionsv1.JSONSchemaProps) { s.Pattern = "" }, interval...)
		installTheirs(t, ext, theirs)

		r := apply(t, want)
		if r.Action != kube.CRDKept || !strings.Contains(r.Reason, "installed by helm") ||
			!strings.Contains(r.Reason, "v1.spec.dcgmExporter.serviceMonitor.interval (ours adds pattern") {
			t.Errorf("got %+v", r)
		}
		if p := propOf(installed(t, want.Name), interval...).Pattern; p != "" {
			t.Errorf("the installed CRD now has pattern %q", p)
		}
	})

	t.Run("a CRD without an x-kubernetes-validations rule ours adds is kept, and the reason names the rule", func(t *testing.T) {
		want := crd("nvidiadrivers.nvidia.com")
		theirs := want.DeepCopy()
		if len(propOf(want, "spec").XValidations) == 0 {
			t.Fatal("ours has no rule on NVIDIADriver's spec any more: pick another")
		}
		editProp(theirs, func(s *apiextensionsv1.JSONSchemaProps) { s.XValidations = nil }, "spec")
		installTheirs(t, ext, theirs)

		r := apply(t, want)
		if r.Action != kube.CRDKept || !strings.Contains(r.Reason, "v1alpha1.spec (ours adds rule") {
			t.Errorf("got %+v", r)
		}
		if rules := propOf(installed(t, want.Name), "spec").XValidations; len(rules) != 0 {
			t.Errorf("the installed CRD now has rules %v", rules)
		}
	})

	t.Run("a subtree left open that ours types", func(t *testing.T) {
		want := crd("clusterpolicies.nvidia.com")
		theirs := want.DeepCopy()
		yes := true
		editProp(theirs, func(s *apiextensionsv1.JSONSchemaProps) {
			*s = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &yes}
		}, "spec", "driver")
		installTheirs(t, ext, theirs)
		policy := func(name string, driver map[string]any) {
			t.Helper()
			cp := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": map[string]any{"name": name},
				"spec": map[string]any{"operator": map[string]any{}, "daemonsets": map[string]any{}, "driver": driver, "toolkit": map[string]any{},
					"devicePlugin": map[string]any{}, "dcgmExporter": map[string]any{}, "dcgm": map[string]any{}, "nodeStatusExporter": map[string]any{},
					"gfd": map[string]any{}},
			}}
			if _, err := dyn.Resource(clusterPolicies).Create(ctx, cp, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
				t.Fatal(err)
			}
		}
		policy("legacy", map[string]any{"enabled": true, "legacyOption": "keep-me"})
		policy("stringly", map[string]any{"enabled": "yes"})

		t.Run("is kept while a stored object would lose a field or be refused, naming each", func(t *testing.T) {
			r := apply(t, want)
			if r.Action != kube.CRDKept || !strings.Contains(r.Reason, "ClusterPolicy legacy (pruned: spec.driver.legacyOption)") ||
				!strings.Contains(r.Reason, "ClusterPolicy stringly (refused: spec.driver.enabled in body must be of type boolean") {
				t.Errorf("got %+v", r)
			}
			if !preservesUnknownFields(propOf(installed(t, want.Name), "spec", "driver")) {
				t.Error("the installed CRD no longer leaves spec.driver open")
			}
			got, err := dyn.Resource(clusterPolicies).Get(ctx, "legacy", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if v, _, _ := unstructured.NestedString(got.Object, "spec", "driver", "legacyOption"); v != "keep-me" {
				t.Errorf("spec.driver.legacyOption is %q", v)
			}
		})

		t.Run("is replaced by ours once no object stored would lose anything", func(t *testing.T) {
			for _, name := range []string{"legacy", "stringly"} {
				if err := dyn.Resource(clusterPolicies).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			policy("modern", map[string]any{"enabled": true, "version": "580.95.05"})
			r := apply(t, want)
			if r.Action != kube.CRDUpdated {
				t.Fatalf("got %+v", r)
			}
			if driver := propOf(installed(t, want.Name), "spec", "driver"); preservesUnknownFields(driver) || driver.Properties["version"].Type != "string" {
				t.Errorf("the installed CRD's spec.driver is not ours: %+v", driver)
			}
		})
	})
}

// editProp changes the schema at a property path of a CRD's first version.
func editProp(crd *apiextensionsv1.CustomResourceDefinition, edit func(*apiextensionsv1.JSONSchemaProps), path ...string) {
	var walk func(s *apiextensionsv1.JSONSchemaProps, path []string)
	walk = func(s *apiextensionsv1.JSONSchemaProps, path []string) {
		if len(path) == 0 {
			edit(s)
			return
		}
		p := s.Properties[path[0]] // values, not pointers: change a copy and put it back
		walk(&p, path[1:])
		s.Properties[path[0]] = p
	}
	walk(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, path)
}

// propOf is the schema at a property path of a CRD's first version (empty when there is none).
func propOf(crd *apiextensionsv1.CustomResourceDefinition, path ...string) apiextensionsv1.JSONSchemaProps {
	s := *crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, name := range path {
		s = s.Properties[name]
	}
	return s
}

func preservesUnknownFields(s apiextensionsv1.JSONSchemaProps) bool {
	return s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
}

// installTheirs creates a CRD as another tool would (field manager helm), replacing any CRD of that
// name, and waits until the API server serves it.
func installTheirs(t *testing.T, ext apiextensionsclient.Interface, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	ctx := t.Context()
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	if err := crds.Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := waitCRDGone(ctx, ext, crd.Name); err != nil {
		t.Fatal(err)
	}
	crd = crd.DeepCopy()
	crd.ResourceVersion = ""
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{FieldManager: "helm"}); err != nil {
		t.Fatal(err)
	}
	if err := kube.WaitCRDEstablished(ctx, ext, crd.Name); err != nil {
		t.Fatal(err)
	}
}

// waitCRDGone waits, with a watch, until the CRD named is deleted (its objects with it).
func waitCRDGone(ctx context.Context, ext apiextensionsclient.Interface, name string) error {
	gone := func(store cache.Store) (bool, error) { return len(store.List()) == 0, nil }
	_, err := watchtools.UntilWithSync(ctx, kube.CRDListWatch(ext, name), &apiextensionsv1.CustomResourceDefinition{}, gone, func(ev watch.Event) (bool, error) {
		return ev.Type == watch.Deleted, nil
	})
	return err
}
