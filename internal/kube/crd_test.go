package kube

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// crd builds a one-version CRD whose spec accepts the given top-level fields.
func crd(version string, fields ...string) *apiextensionsv1.CustomResourceDefinition {
	props := map[string]apiextensionsv1.JSONSchemaProps{}
	for _, f := range fields {
		props[f] = apiextensionsv1.JSONSchemaProps{Type: "object"}
	}
	c := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "clusterpolicies.nvidia.com", Annotations: map[string]string{}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
			Name: "v1", Served: true, Storage: true,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Properties: props}},
			}},
		}}},
	}
	if version != "" {
		c.Annotations[CRDVersionAnnotation] = version
	}
	return c
}

func TestDowngradeReason(t *testing.T) {
	open := crd("", "driver")
	yes := true
	open.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &yes}
	for _, tc := range []struct {
		name       string
		have, want *apiextensionsv1.CustomResourceDefinition
		ours       string
		kept       string // "" = apply
	}{
		{"our older CRD is upgraded", crd("v26.3.3", "driver"), crd("", "driver", "toolkit"), "v26.7.0", ""},
		{"our same-version CRD is applied (the dry run decides whether anything changes)", crd("v26.7.0", "driver"), crd("", "driver"), "v26.7.0", ""},
		{"a CRD a newer gpuctl applied is kept", crd("v27.1.0", "driver", "gpuCluster"), crd("", "driver"), "v26.7.0", "newer than v26.7.0"},
		{"another tool's CRD with fewer fields is taken over (the stale-CRD failure of seed 002)", crd("", "driver"), crd("", "driver", "toolkit"), "v26.7.0", ""},
		{"another tool's CRD that accepts fields ours lacks is kept", crd("", "driver", "futureThing"), crd("", "driver"), "v26.7.0", "v1.spec.futureThing"},
		{"fields under a subtree ours leaves open are not missing", crd("", "driver", "futureThing"), open, "v26.7.0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := downgradeReason(tc.have, tc.want, tc.ours)
			if (got == "") != (tc.kept == "") || !strings.Contains(got, tc.kept) {
				t.Errorf("downgradeReason = %q, want %q", got, tc.kept)
			}
		})
	}
}
