package flavor

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/e2e/upstream"
	"github.com/gpuctl/gpuctl/internal/bundle"
)

// The OLM stand-in's catalog offers each release's CSV with the alm-examples the flavour writes, and
// installs that release's own bundle CRDs: every example must fit those CRDs (no field the API server
// would prune, no missing required field, no wrong type or enum value).
func TestOpenShiftCatalogExamplesFitEachReleasesCRDs(t *testing.T) {
	pm := gpuOperatorPackage("")
	channels, _ := pm.Object["status"].(map[string]any)["channels"].([]any)
	heads := map[string]map[string]any{}
	for _, ch := range channels {
		desc := ch.(map[string]any)["currentCSVDesc"].(map[string]any)
		heads["v"+desc["version"].(string)] = desc
	}
	for _, b := range bundle.List() {
		t.Run(b.Version, func(t *testing.T) {
			desc, ok := heads[b.Version]
			if !ok {
				t.Fatalf("no channel of the catalog has %s at its head", b.Version)
			}
			tree := upstream.TreeT(t, b.Version)
			crds := bundleCRDsIn(t, filepath.Join(tree, "bundle", "manifests"))
			var examples []map[string]any
			if err := json.Unmarshal([]byte(desc["annotations"].(map[string]any)["alm-examples"].(string)), &examples); err != nil {
				t.Fatal(err)
			}
			for _, ex := range examples {
				apiVersion, kind := ex["apiVersion"].(string), ex["kind"].(string)
				schema := crdSchema(crds, apiVersion, kind)
				if schema == nil {
					t.Errorf("%s %s: no CRD of the bundle serves it", apiVersion, kind)
					continue
				}
				spec := schema.Properties["spec"]
				for _, p := range schemaProblems("spec", ex["spec"], &spec) {
					t.Errorf("%s: %s", kind, p)
				}
			}
		})
	}
}

// The default channel of the catalog follows Options.OperatorVersion.
func TestOpenShiftCatalogDefaultChannelFollowsTheOperatorVersion(t *testing.T) {
	for release, want := range map[string]string{"": "v26.7", "v26.7.0": "v26.7", "v26.3.3": "v26.3", "v25.10.1": "v25.10"} {
		pm := gpuOperatorPackage(release)
		if got := pm.Object["status"].(map[string]any)["defaultChannel"]; got != want {
			t.Errorf("operator version %q: default channel %v, want %s", release, got, want)
		}
	}
}

func bundleCRDsIn(t *testing.T, dir string) []apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	var out []apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "\nkind: CustomResourceDefinition") {
			continue
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, crd)
	}
	if len(out) == 0 {
		t.Fatalf("no CRDs in %s", dir)
	}
	return out
}

func crdSchema(crds []apiextensionsv1.CustomResourceDefinition, apiVersion, kind string) *apiextensionsv1.JSONSchemaProps {
	group, version, _ := strings.Cut(apiVersion, "/")
	for _, crd := range crds {
		if crd.Spec.Group != group || crd.Spec.Names.Kind != kind {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == version && v.Schema != nil {
				return v.Schema.OpenAPIV3Schema
			}
		}
	}
	return nil
}

// schemaProblems checks a JSON value against a structural schema the way the API server's pruning and
// validation would treat it, as far as the alm-examples need: unknown fields, required fields
// (after defaulting), types and enums.
func schemaProblems(path string, v any, s *apiextensionsv1.JSONSchemaProps) []string {
	if s == nil {
		return nil
	}
	var out []string
	bad := func(format string, args ...any) { out = append(out, path+": "+fmt.Sprintf(format, args...)) }
	if len(s.Enum) > 0 {
		raw, _ := json.Marshal(v)
		if !slices.ContainsFunc(s.Enum, func(e apiextensionsv1.JSON) bool { return string(e.Raw) == string(raw) }) {
			bad("%s is not one of the enum", raw)
		}
	}
	switch val := v.(type) {
	case map[string]any:
		if s.Type != "object" {
			bad("an object where the schema has %q", s.Type)
			return out
		}
		for _, r := range s.Required {
			// The API server defaults before it validates: a required field with a default may be left out.
			if _, ok := val[r]; !ok && s.Properties[r].Default == nil {
				bad("required field %s missing", r)
			}
		}
		for k, x := range val {
			switch p, ok := s.Properties[k]; {
			case ok:
				out = append(out, schemaProblems(path+"."+k, x, &p)...)
			case s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
				out = append(out, schemaProblems(path+"."+k, x, s.AdditionalProperties.Schema)...)
			case s.AdditionalProperties != nil && s.AdditionalProperties.Allows,
				s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields:
			default:
				out = append(out, path+"."+k+": unknown field (the API server prunes it)")
			}
		}
	case []any:
		if s.Type != "array" {
			bad("an array where the schema has %q", s.Type)
			return out
		}
		if s.Items != nil && s.Items.Schema != nil {
			for i, x := range val {
				out = append(out, schemaProblems(fmt.Sprintf("%s[%d]", path, i), x, s.Items.Schema)...)
			}
		}
	case string:
		if s.Type != "string" && !s.XIntOrString {
			bad("a string where the schema has %q", s.Type)
		}
	case float64:
		if s.Type != "integer" && s.Type != "number" && !s.XIntOrString {
			bad("a number where the schema has %q", s.Type)
		}
	case bool:
		if s.Type != "boolean" {
			bad("a boolean where the schema has %q", s.Type)
		}
	}
	return out
}
