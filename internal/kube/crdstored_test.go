package kube

import (
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
)

// openDriverCRD leaves spec.driver open; typedDriverCRD types it: a version with a pattern, and a
// rule that the version is not "latest".
func openDriverCRD() *apiextensionsv1.CustomResourceDefinition {
	yes := true
	return namedCRD(crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{
		"driver": {Type: "object", XPreserveUnknownFields: &yes},
	})))
}

func typedDriverCRD() *apiextensionsv1.CustomResourceDefinition {
	driver := object(map[string]apiextensionsv1.JSONSchemaProps{
		"enabled": {Type: "boolean"},
		"version": {Type: "string", Pattern: "^v"},
	})
	driver.XValidations = []apiextensionsv1.ValidationRule{{Rule: "!has(self.version) || self.version != 'vlatest'", Message: "refused: spec.driver: pin a version"}}
	return namedCRD(crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{"driver": driver})))
}

func namedCRD(c *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	c.Spec.Group = "nvidia.com"
	c.Spec.Scope = apiextensionsv1.ClusterScoped
	c.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Kind: "ClusterPolicy", ListKind: "ClusterPolicyList", Plural: "clusterpolicies", Singular: "clusterpolicy"}
	return c
}

func clusterPolicy(name string, driver map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"driver": driver},
	}}
}

// TestObjectLoss runs the API server's pruning and validation on stored objects as ours would.
func TestObjectLoss(t *testing.T) {
	mustSchema := func(c *apiextensionsv1.CustomResourceDefinition) *crSchema {
		s, err := versionSchema(c, "v1")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	theirs, ours := mustSchema(openDriverCRD()), mustSchema(typedDriverCRD())
	for _, tc := range []struct {
		name   string
		theirs *crSchema
		driver map[string]any
		want   string // "" or a substring of the loss
	}{
		{"an object ours types fully loses nothing", theirs, map[string]any{"enabled": true, "version": "v1.2"}, ""},
		{"a field ours does not declare would be pruned", theirs, map[string]any{"enabled": true, "custom": map[string]any{"a": int64(1)}, "other": int64(1)},
			"pruned: spec.driver.custom, spec.driver.other"},
		{"a value ours' pattern refuses would be refused", theirs, map[string]any{"version": "1.2"}, "refused: spec.driver.version in body should match '^v'"},
		{"a value ours' type refuses would be refused", theirs, map[string]any{"enabled": "yes"}, "refused: spec.driver.enabled in body must be of type boolean"},
		{"a value ours' rule refuses would be refused", theirs, map[string]any{"version": "vlatest"}, "refused: spec.driver: pin a version"},
		{"what theirs refuses too is not ours to report", ours, map[string]any{"version": "1.2"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := clusterPolicy("p", tc.driver)
			before := obj.DeepCopy()
			got := objectLoss(t.Context(), tc.theirs, ours, obj.Object)
			if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
				t.Errorf("objectLoss = %q, want %q", got, tc.want)
			}
			if !equalJSON(before.Object, obj.Object) {
				t.Errorf("the stored object was changed: %v", obj.Object)
			}
		})
	}
}

func equalJSON(a, b map[string]any) bool {
	ja, _ := (&unstructured.Unstructured{Object: a}).MarshalJSON()
	jb, _ := (&unstructured.Unstructured{Object: b}).MarshalJSON()
	return string(ja) == string(jb)
}

// TestStoredLosses lists the stored objects and names each that ours would prune or refuse.
func TestStoredLosses(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "nvidia.com", Version: "v1", Resource: "clusterpolicies"}
	listKinds := map[schema.GroupVersionResource]string{gvr: "ClusterPolicyList"}
	have, want := openDriverCRD(), typedDriverCRD()

	t.Run("no stored objects: nothing is lost", func(t *testing.T) {
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds)
		got, err := storedLosses(t.Context(), dyn, have, want, []string{"v1"})
		if err != nil || len(got) != 0 {
			t.Fatalf("storedLosses = %q, %v", got, err)
		}
	})
	t.Run("each object that would lose fields or be refused is named", func(t *testing.T) {
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds,
			clusterPolicy("fine", map[string]any{"version": "v1"}),
			clusterPolicy("custom", map[string]any{"version": "v1", "custom": true}),
			clusterPolicy("unpinned", map[string]any{"version": "vlatest"}),
		)
		got, err := storedLosses(t.Context(), dyn, have, want, []string{"v1"})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if len(got) != 2 || got[0] != "ClusterPolicy custom (pruned: spec.driver.custom)" || !strings.HasPrefix(got[1], "ClusterPolicy unpinned (refused: ") {
			t.Errorf("storedLosses = %q", got)
		}
	})
	t.Run("objects gpuctl may not list keep the CRD", func(t *testing.T) {
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds)
		dyn.PrependReactor("list", "clusterpolicies", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(gvr.GroupResource(), "", nil)
		})
		got, err := storedLosses(t.Context(), dyn, have, want, []string{"v1"})
		if err != nil || len(got) != 1 || !strings.Contains(got[0], "clusterpolicies.nvidia.com (could not be listed: forbidden)") {
			t.Errorf("storedLosses = %q, %v", got, err)
		}
	})
}

// TestStoredLossesOnARelease: v26.7.0's ClusterPolicy CRD adds minimum 0 to a relabeling's modulus
// (v26.3.3's has none); a stored v26.3.3 ClusterPolicy with a negative modulus would be refused.
func TestStoredLossesOnARelease(t *testing.T) {
	have, want := readChartCRD(t, "v26.3.3", "clusterpolicies.nvidia.com"), readChartCRD(t, "", "clusterpolicies.nvidia.com")
	cp := func(name string, modulus int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"dcgmExporter": map[string]any{"serviceMonitor": map[string]any{
				"relabelings": []any{map[string]any{"action": "hashmod", "modulus": modulus, "targetLabel": "shard"}},
			}}},
		}}
	}
	gvr := schema.GroupVersionResource{Group: "nvidia.com", Version: "v1", Resource: "clusterpolicies"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ClusterPolicyList"},
		cp("sharded", 4), cp("negative", -1))
	got, err := storedLosses(t.Context(), dyn, have, want, []string{"v1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "ClusterPolicy negative (refused: spec.dcgmExporter.serviceMonitor.relabelings[0].modulus in body should be greater than or equal to 0") {
		t.Errorf("storedLosses = %q", got)
	}
}
