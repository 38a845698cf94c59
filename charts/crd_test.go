package charts

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"sigs.k8s.io/yaml"
)

// crdVersion is one served version of a CRD from the charts, with its structural schema.
type crdVersion struct {
	crd        *apiextensionsv1.CustomResourceDefinition
	version    apiextensionsv1.CustomResourceDefinitionVersion
	structural *schema.Structural
}

// loadCRDs reads every CRD of both charts, keyed by "<group>/<version>/<Kind>". It fails the test on
// anything the API server would refuse to register: unknown fields, a non-structural schema.
func loadCRDs(t *testing.T) map[string]crdVersion {
	t.Helper()
	out := map[string]crdVersion{}
	for _, name := range Names() {
		for _, f := range mustLoad(t, name).CRDObjects() {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.UnmarshalStrict(f.File.Data, crd); err != nil {
				t.Fatalf("%s/%s: %v", name, f.Name, err)
			}
			for _, v := range crd.Spec.Versions {
				if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
					t.Fatalf("%s %s has no schema", crd.Name, v.Name)
				}
				internal := &apiextensions.JSONSchemaProps{}
				if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
					t.Fatalf("%s %s: %v", crd.Name, v.Name, err)
				}
				s, err := schema.NewStructural(internal)
				if err != nil {
					t.Fatalf("%s %s: not structural: %v", crd.Name, v.Name, err)
				}
				if errs := schema.ValidateStructural(nil, s); len(errs) > 0 {
					t.Fatalf("%s %s: not structural: %v", crd.Name, v.Name, errs.ToAggregate())
				}
				out[crd.Spec.Group+"/"+v.Name+"/"+crd.Spec.Names.Kind] = crdVersion{crd: crd, version: v, structural: s}
			}
		}
	}
	return out
}

func TestCRDsAreStructuralAndComplete(t *testing.T) {
	crds := loadCRDs(t)
	want := map[string]apiextensionsv1.ResourceScope{
		"nfd.k8s-sigs.io/v1alpha1/NodeFeature":      apiextensionsv1.NamespaceScoped,
		"nfd.k8s-sigs.io/v1alpha1/NodeFeatureRule":  apiextensionsv1.ClusterScoped,
		"nfd.k8s-sigs.io/v1alpha1/NodeFeatureGroup": apiextensionsv1.NamespaceScoped,
		"nvidia.com/v1/ClusterPolicy":               apiextensionsv1.ClusterScoped,
		"nvidia.com/v1alpha1/NVIDIADriver":          apiextensionsv1.ClusterScoped,
	}
	for key, scope := range want {
		t.Run(key, func(t *testing.T) {
			c, ok := crds[key]
			if !ok {
				t.Fatalf("no CRD serves %s", key)
			}
			if c.crd.APIVersion != "apiextensions.k8s.io/v1" || c.crd.Kind != "CustomResourceDefinition" {
				t.Errorf("%s is a %s %s", c.crd.Name, c.crd.APIVersion, c.crd.Kind)
			}
			if c.crd.Name != c.crd.Spec.Names.Plural+"."+c.crd.Spec.Group {
				t.Errorf("name %s is not <plural>.<group>", c.crd.Name)
			}
			if c.crd.Spec.Scope != scope {
				t.Errorf("scope %s, want %s", c.crd.Spec.Scope, scope)
			}
			if !c.version.Served || !c.version.Storage {
				t.Errorf("version %s served=%v storage=%v", c.version.Name, c.version.Served, c.version.Storage)
			}
			// Printer columns must point at fields the schema has.
			for _, col := range c.version.AdditionalPrinterColumns {
				path := strings.Split(strings.TrimPrefix(col.JSONPath, "."), ".")
				if path[0] == "metadata" {
					continue
				}
				s := c.structural
				for _, p := range path {
					next, ok := s.Properties[p]
					if !ok {
						t.Errorf("printer column %s: %s has no field %s", col.Name, col.JSONPath, p)
						break
					}
					s = &next
				}
			}
		})
	}

	// The GPU Operator's own objects need the status subresource (the operator writes status with
	// Status().Update) and the spec sections NVIDIA's schema requires (research §2.1).
	cp := crds["nvidia.com/v1/ClusterPolicy"]
	if cp.version.Subresources == nil || cp.version.Subresources.Status == nil {
		t.Error("ClusterPolicy has no status subresource")
	}
	required := slices.Sorted(slices.Values(cp.version.Schema.OpenAPIV3Schema.Properties["spec"].Required))
	wantRequired := []string{"daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "driver", "gfd", "nodeStatusExporter", "operator", "toolkit"}
	if !slices.Equal(required, wantRequired) {
		t.Errorf("ClusterPolicy spec requires %v, want %v", required, wantRequired)
	}
	status := cp.structural.Properties["status"]
	for _, f := range []string{"state", "namespace", "conditions"} {
		if _, ok := status.Properties[f]; !ok {
			t.Errorf("ClusterPolicy status has no %s", f)
		}
	}
}

// checkCustomResources validates every rendered object that one of the charts' CRDs serves, as the API
// server would on create: nothing may be pruned (a field the CRD does not know would silently vanish)
// and the schema's types, enums and required fields must hold.
func checkCustomResources(t *testing.T, crds map[string]crdVersion, objs []map[string]any) {
	t.Helper()
	for _, o := range objs {
		key := field[string](o, "apiVersion") + "/" + field[string](o, "kind")
		c, ok := crds[key]
		if !ok {
			continue
		}
		validateAgainstCRD(t, c, o)
	}
}

func validateAgainstCRD(t *testing.T, c crdVersion, obj map[string]any) {
	t.Helper()
	id := field[string](obj, "kind") + " " + field[string](obj, "metadata", "name")
	copied := runtime.DeepCopyJSON(obj)
	opts := schema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}
	if pruned := pruning.PruneWithOptions(copied, c.structural, true, opts); len(pruned) > 0 {
		t.Errorf("%s: the CRD would prune %v", id, pruned)
	}
	res := validate.NewSchemaValidator(c.structural.ToKubeOpenAPI(), nil, "", strfmt.Default).Validate(obj)
	for _, err := range res.Errors {
		t.Errorf("%s: %v", id, err)
	}
}

// TestStatusAcceptsWhatTheOperatorWrites: the operator (module d73a0086) writes status.state, the
// namespace and metav1.Conditions through the status subresource, first with an empty state.
func TestStatusAcceptsWhatTheOperatorWrites(t *testing.T) {
	crds := loadCRDs(t)
	for _, key := range []string{"nvidia.com/v1/ClusterPolicy", "nvidia.com/v1alpha1/NVIDIADriver"} {
		for _, state := range []string{"", "ready", "notReady", "ignored", "disabled"} {
			t.Run(key+" "+state, func(t *testing.T) {
				apiVersion, kind, _ := strings.Cut(key[strings.Index(key, "/")+1:], "/")
				obj := map[string]any{
					"apiVersion": "nvidia.com/" + apiVersion,
					"kind":       kind,
					"metadata":   map[string]any{"name": "x"},
					"spec":       minimalSpec(kind),
					"status": map[string]any{
						"state":     state,
						"namespace": "gpu-operator",
						"conditions": []any{map[string]any{
							"type": "Ready", "status": "True", "observedGeneration": int64(1),
							"lastTransitionTime": "2026-08-21T10:00:00Z", "reason": "Reconciled", "message": "",
						}},
					},
				}
				validateAgainstCRD(t, crds[key], obj)
			})
		}
	}
}

func minimalSpec(kind string) map[string]any {
	if kind == "NVIDIADriver" {
		return map[string]any{"driverType": "gpu", "image": "driver"}
	}
	spec := map[string]any{}
	for _, s := range []string{"operator", "daemonsets", "driver", "toolkit", "devicePlugin", "dcgmExporter", "dcgm", "nodeStatusExporter", "gfd"} {
		spec[s] = map[string]any{}
	}
	return spec
}

// TestCRDsRejectWhatTheOperatorCannotUse makes sure the schemas are more than "any object": wrong types
// and values outside the operator's enums fail as they would on the API server.
func TestCRDsRejectWhatTheOperatorCannotUse(t *testing.T) {
	crds := loadCRDs(t)
	cp := crds["nvidia.com/v1/ClusterPolicy"]
	tests := []struct {
		name   string
		mutate func(spec map[string]any)
	}{
		{"a missing required section", func(spec map[string]any) { delete(spec, "toolkit") }},
		{"a string for driver.enabled", func(spec map[string]any) { spec["driver"] = map[string]any{"enabled": "yes"} }},
		{"an unknown kernel module type", func(spec map[string]any) { spec["driver"] = map[string]any{"kernelModuleType": "closed"} }},
		{"an unknown update strategy", func(spec map[string]any) { spec["daemonsets"] = map[string]any{"updateStrategy": "Recreate"} }},
		{"an env entry without a name", func(spec map[string]any) {
			spec["toolkit"] = map[string]any{"env": []any{map[string]any{"value": "x"}}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := minimalSpec("ClusterPolicy")
			tt.mutate(spec)
			obj := map[string]any{"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": map[string]any{"name": "x"}, "spec": spec}
			res := validate.NewSchemaValidator(cp.structural.ToKubeOpenAPI(), nil, "", strfmt.Default).Validate(obj)
			if len(res.Errors) == 0 {
				t.Error("the CRD schema accepts it")
			}
		})
	}
}
