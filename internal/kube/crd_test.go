package kube

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// crd builds a one-version CRD whose spec has the given properties (each an object unless given).
func crd(version string, fields ...string) *apiextensionsv1.CustomResourceDefinition {
	props := map[string]apiextensionsv1.JSONSchemaProps{}
	for _, f := range fields {
		props[f] = apiextensionsv1.JSONSchemaProps{Type: "object"}
	}
	return crdWithSpec(version, apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props})
}

func crdWithSpec(version string, spec apiextensionsv1.JSONSchemaProps) *apiextensionsv1.CustomResourceDefinition {
	c := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "clusterpolicies.nvidia.com", Annotations: map[string]string{}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
			Name: "v1", Served: true, Storage: true,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec},
			}},
		}}},
	}
	if version != "" {
		c.Annotations[CRDVersionAnnotation] = version
	}
	return c
}

// object is a spec schema with the given properties.
func object(props map[string]apiextensionsv1.JSONSchemaProps, required ...string) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props, Required: required}
}

func str(enum ...string) apiextensionsv1.JSONSchemaProps {
	s := apiextensionsv1.JSONSchemaProps{Type: "string"}
	for _, e := range enum {
		s.Enum = append(s.Enum, apiextensionsv1.JSON{Raw: []byte(`"` + e + `"`)})
	}
	return s
}

// managedBy records field managers as the API server does: name -> (owns spec, seconds after t0).
func managedBy(c *apiextensionsv1.CustomResourceDefinition, entries ...managed) *apiextensionsv1.CustomResourceDefinition {
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	for _, e := range entries {
		fields := `{"f:metadata":{"f:annotations":{}}}`
		if e.spec {
			fields = `{"f:spec":{"f:versions":{}}}`
		}
		op := metav1.ManagedFieldsOperationUpdate
		if e.manager == FieldManager {
			op = metav1.ManagedFieldsOperationApply
		}
		c.ManagedFields = append(c.ManagedFields, metav1.ManagedFieldsEntry{
			Manager: e.manager, Operation: op, Time: &metav1.Time{Time: t0.Add(time.Duration(e.at) * time.Second)},
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)},
		})
	}
	return c
}

// keepReasonT is keepReason on a cluster that stores no objects of the kind.
func keepReasonT(t *testing.T, have, want *apiextensionsv1.CustomResourceDefinition, ours string, releases map[string][]*apiextensionsv1.CustomResourceDefinition) string {
	t.Helper()
	got, err := keepReason(t.Context(), have, want, ours, releases, noneStored)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func noneStored(context.Context, *apiextensionsv1.CustomResourceDefinition, *apiextensionsv1.CustomResourceDefinition, []string) ([]string, error) {
	return nil, nil
}

type managed struct {
	manager string
	spec    bool
	at      int
}

func TestKeepReason(t *testing.T) {
	yes := true
	open := crdWithSpec("", apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &yes})
	openDriver := crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{
		"driver": {Type: "object", XPreserveUnknownFields: &yes},
	}))
	typedDriver := crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{
		"driver": object(map[string]apiextensionsv1.JSONSchemaProps{"enabled": {Type: "boolean"}, "hostNetwork": {Type: "boolean"}}),
	}))
	labels := func(value apiextensionsv1.JSONSchemaProps) *apiextensionsv1.CustomResourceDefinition {
		return crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{
			"labels": {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &value}},
		}))
	}
	mode := func(enum ...string) *apiextensionsv1.CustomResourceDefinition {
		return crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{"mode": str(enum...)}))
	}
	intOrString := crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{"maxUnavailable": {XIntOrString: true}}))
	onlyString := crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{"maxUnavailable": str()}))
	twoVersions := crd("", "driver")
	v2 := twoVersions.Spec.Versions[0]
	v2.Name, v2.Storage = "v2", false
	twoVersions.Spec.Versions = append(twoVersions.Spec.Versions, v2)
	stored := crd("", "driver")
	stored.Status.StoredVersions = []string{"v1alpha1", "v1"}

	for _, tc := range []struct {
		name       string
		have, want *apiextensionsv1.CustomResourceDefinition
		ours       string
		kept       []string // nil = apply; else substrings of the reason
	}{
		{"our older CRD is upgraded", crd("v26.3.3", "driver"), crd("", "driver", "toolkit"), "v26.7.0", nil},
		{"our older CRD is upgraded even where the newer release dropped a field", managedBy(crd("v26.3.3", "driver", "gone"), managed{FieldManager, true, 0}), crd("", "driver"), "v26.7.0", nil},
		{"our same-version CRD is applied (the dry run decides whether anything changes)", crd("v26.7.0", "driver"), crd("", "driver"), "v26.7.0", nil},
		{"a CRD a newer gpuctl applied is kept", crd("v27.1.0", "driver", "gpuCluster"), crd("", "driver"), "v26.7.0", []string{"gpuctl for v27.1.0, newer than v26.7.0"}},
		{"our same-version CRD that another tool widened since is kept",
			managedBy(crd("v26.7.0", "driver", "futureThing"), managed{FieldManager, true, 0}, managed{"kubectl", true, 60}), crd("", "driver"), "v26.7.0",
			[]string{"gpuctl for v26.7.0, then changed by kubectl", "v1.spec.futureThing"}},
		{"our CRD that a tool co-owns from before our apply is ours: applied",
			managedBy(crd("v26.3.3", "driver", "gone"), managed{"helm", true, 0}, managed{FieldManager, true, 60}), crd("", "driver"), "v26.7.0", nil},
		{"a tool that changed only metadata since does not make it foreign",
			managedBy(crd("v26.3.3", "driver", "gone"), managed{FieldManager, true, 0}, managed{"kubectl-label", false, 60}), crd("", "driver"), "v26.7.0", nil},
		{"another tool's CRD with fewer fields is taken over (the stale-CRD failure)", crd("", "driver"), crd("", "driver", "toolkit"), "v26.7.0", nil},
		{"another tool's CRD that accepts fields ours lacks is kept, naming the tool and the paths",
			managedBy(crd("", "driver", "futureThing"), managed{"helm", true, 0}), crd("", "driver"), "v26.7.0",
			[]string{"installed by helm", "v1.spec.futureThing"}},
		{"without managed fields the tool is unknown", crd("", "driver", "futureThing"), crd("", "driver"), "v26.7.0", []string{"another tool", "v1.spec.futureThing"}},
		{"a long list is cut after three paths", crd("", "a", "b", "c", "d", "e"), crd(""), "v26.7.0", []string{"v1.spec.a, v1.spec.b, v1.spec.c, and 2 more"}},
		{"paths under a subtree ours leaves open are accepted", crd("", "driver", "futureThing"), open, "v26.7.0", nil},
		{"a typed path under an object ours leaves open is accepted", typedDriver, openDriver, "v26.7.0", nil},
		{"an object theirs leaves open and ours types is applied when no stored object would lose anything", openDriver, typedDriver, "v26.7.0", nil},
		{"a pattern ours adds is kept", crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{"version": str()})),
			crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{"version": {Type: "string", Pattern: "^v"}})), "v26.7.0",
			[]string{`v1.spec.version (ours adds pattern "^v")`}},
		{"a map's values are compared", labels(object(map[string]apiextensionsv1.JSONSchemaProps{"a": str(), "b": str()})),
			labels(object(map[string]apiextensionsv1.JSONSchemaProps{"a": str()})), "v26.7.0", []string{"v1.spec.labels.*.b"}},
		{"a map ours types like theirs is accepted", labels(str()), labels(str()), "v26.7.0", nil},
		{"an enum value ours lacks is kept", mode("on", "off", "devtools"), mode("on", "off"), "v26.7.0", []string{`v1.spec.mode (value "devtools")`}},
		{"an enum ours widens is applied", mode("on", "off"), mode("on", "off", "devtools"), "v26.7.0", nil},
		{"an enum where theirs takes any string is kept", mode(), mode("on"), "v26.7.0", []string{"v1.spec.mode (any value; ours has an enum)"}},
		{"a narrower type is kept", intOrString, onlyString, "v26.7.0", []string{"v1.spec.maxUnavailable (integer or string; ours: string)"}},
		{"a wider type is applied", onlyString, intOrString, "v26.7.0", nil},
		{"a field ours requires and theirs does not is kept",
			crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{"operator": str()})),
			crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{"operator": str()}, "operator")), "v26.7.0",
			[]string{"v1.spec.operator (required by ours)"}},
		{"a field ours requires with a default is applied (the API server always fills it in)",
			crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{"default": {Type: "boolean"}})),
			crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{"default": {Type: "boolean", Default: &apiextensionsv1.JSON{Raw: []byte("false")}}}, "default")), "v26.7.0",
			nil},
		{"a served version ours lacks is kept", twoVersions, crd("", "driver"), "v26.7.0", []string{"version v2"}},
		{"a stored version ours lacks is kept (the API server would refuse ours)", stored, crd("", "driver"), "v26.7.0", []string{"stored version v1alpha1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := keepReasonT(t, tc.have, tc.want, tc.ours, nil)
			if (got == "") != (tc.kept == nil) {
				t.Fatalf("keepReason = %q, want kept=%v", got, tc.kept != nil)
			}
			for _, s := range tc.kept {
				if !strings.Contains(got, s) {
					t.Errorf("keepReason = %q, want it to say %q", got, s)
				}
			}
		})
	}
}

// TestKeepReasonAsksTheStoredObjects: where ours types what a foreign CRD leaves open, or tightens
// a value constraint of a known older release's CRD, the stored objects decide.
func TestKeepReasonAsksTheStoredObjects(t *testing.T) {
	yes := true
	openDriver := managedBy(crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{
		"driver": {Type: "object", XPreserveUnknownFields: &yes},
	})), managed{"helm", true, 0})
	typedDriver := crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{
		"driver": object(map[string]apiextensionsv1.JSONSchemaProps{"version": str()}),
	}))
	older := crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{"modulus": {Type: "integer"}}))
	tighter := crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{"modulus": {Type: "integer", Minimum: ptr(0.0)}}))
	releases := map[string][]*apiextensionsv1.CustomResourceDefinition{"v26.3.3": {older}, "v26.7.0": {tighter}}
	loses := func(context.Context, *apiextensionsv1.CustomResourceDefinition, *apiextensionsv1.CustomResourceDefinition, []string) ([]string, error) {
		return []string{"ClusterPolicy p (pruned: spec.driver.custom)"}, nil
	}
	var asked []string
	record := func(_ context.Context, _, _ *apiextensionsv1.CustomResourceDefinition, versions []string) ([]string, error) {
		asked = append(asked, versions...)
		return nil, nil
	}
	for _, tc := range []struct {
		name       string
		have, want *apiextensionsv1.CustomResourceDefinition
		releases   map[string][]*apiextensionsv1.CustomResourceDefinition
		stored     storedCheck
		kept       []string
	}{
		{"an open object ours types is applied when no stored object would lose anything", openDriver, typedDriver, nil, record, nil},
		{"an open object ours types is kept when a stored object would lose a field, naming it", openDriver, typedDriver, nil, loses,
			[]string{"installed by helm", "ClusterPolicy p (pruned: spec.driver.custom)"}},
		{"an open object ours types is kept when the stored objects cannot be read", openDriver, typedDriver, nil, nil,
			[]string{"v1.spec.driver (left open; ours types it)", "stored objects not checked"}},
		{"a known older release's CRD is upgraded though ours tightens a value, when no stored object would be refused", older, tighter, releases, record, nil},
		{"a known older release's CRD is kept when a stored object would be refused", older, tighter, releases, loses, []string{"ClusterPolicy p"}},
		{"a CRD no release has is kept when ours tightens a value, whatever is stored", older, tighter, nil, record, []string{"v1.spec.modulus (ours adds minimum 0)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked = nil
			got, err := keepReason(t.Context(), tc.have, tc.want, "v26.7.0", tc.releases, tc.stored)
			if err != nil {
				t.Fatal(err)
			}
			if (got == "") != (tc.kept == nil) {
				t.Fatalf("keepReason = %q, want kept=%v", got, tc.kept != nil)
			}
			for _, s := range tc.kept {
				if !strings.Contains(got, s) {
					t.Errorf("keepReason = %q, want it to say %q", got, s)
				}
			}
			if tc.kept == nil && !slices.Equal(asked, []string{"v1"}) {
				t.Errorf("stored objects asked for versions %v, want [v1]", asked)
			}
		})
	}
}

// TestKeepReasonRecognisesANewerRelease: a foreign CRD that is exactly a known release's is that
// release's; when it is newer than ours it is kept even though ours accepts every path it does (here
// the newer release dropped a field).
func TestKeepReasonRecognisesANewerRelease(t *testing.T) {
	older, newerCRD := crd("", "driver", "legacy"), crd("", "driver")
	releases := map[string][]*apiextensionsv1.CustomResourceDefinition{"v26.3.3": {older}, "v26.7.0": {newerCRD}}
	have := managedBy(crd("", "driver"), managed{"helm", true, 0})
	if got := keepReasonT(t, have, older, "v26.3.3", releases); !strings.Contains(got, "the v26.7.0 release's CRD, newer than ours (v26.3.3)") || !strings.Contains(got, "helm") {
		t.Errorf("older ours over a newer release's CRD: %q", got)
	}
	if got := keepReasonT(t, have, older, "v26.3.3", nil); got != "" {
		t.Errorf("without the releases, only the schema decides: %q", got)
	}
	if got := keepReasonT(t, have, newerCRD, "v26.7.0", releases); got != "" {
		t.Errorf("the same release: %q", got)
	}
	unknown := crd("", "driver", "somethingElse")
	if got := keepReasonT(t, unknown, crd("", "driver", "somethingElse", "more"), "v26.3.3", releases); got != "" {
		t.Errorf("a schema no release has, which ours widens: %q", got)
	}
}

// readChartCRD reads a CRD generated by `make crds` from the gpu-operator chart: release "" is the
// default's crds/, else releases/<release>/crds/.
func readChartCRD(t *testing.T, release, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	dir := filepath.Join("..", "..", "charts", "gpu-operator", "crds")
	if release != "" {
		dir = filepath.Join("..", "..", "charts", "gpu-operator", "releases", release, "crds")
	}
	b, err := os.ReadFile(filepath.Join(dir, name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestKeepReasonWithGeneratedCRDs uses the CRDs `make crds` generates from NVIDIA's v25.10.1, v26.3.3
// and v26.7.0 API types as the CRDs another tool installed (NVIDIA's chart carries the same schemas,
// with descriptions) and as ours.
func TestKeepReasonWithGeneratedCRDs(t *testing.T) {
	const latest = "" // the chart's default release, v26.7.0
	releases := map[string][]*apiextensionsv1.CustomResourceDefinition{}
	for _, r := range []struct{ version, dir string }{{"v26.7.0", latest}, {"v26.3.3", "v26.3.3"}, {"v25.10.1", "v25.10.1"}} {
		for _, n := range []string{"clusterpolicies.nvidia.com", "nvidiadrivers.nvidia.com"} {
			releases[r.version] = append(releases[r.version], readChartCRD(t, r.dir, n))
		}
	}
	helm := func(c *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
		return managedBy(c.DeepCopy(), managed{"helm", true, 0})
	}
	for version, crds := range releases {
		for _, c := range crds {
			if got := identify(helm(c), releases); got != version {
				t.Errorf("%s of %s is recognised as %q's", c.Name, version, got)
			}
		}
	}
	for _, name := range []string{"clusterpolicies.nvidia.com", "nvidiadrivers.nvidia.com"} {
		for _, tc := range []struct {
			name          string
			theirs, ours  string // release dirs
			oursVersion   string
			kept          bool
			wantInReasons []string
		}{
			{"NVIDIA's v26.7.0 CRD under gpuctl v26.7.0 is applied: ours accepts the same", latest, latest, "v26.7.0", false, nil},
			{"NVIDIA's v26.3.3 CRD is upgraded to v26.7.0", "v26.3.3", latest, "v26.7.0", false, nil},
			{"NVIDIA's v25.10.1 CRD is upgraded to v26.7.0", "v25.10.1", latest, "v26.7.0", false, nil},
			{"NVIDIA's v26.7.0 CRD is kept under --operator-version v26.3.3", latest, "v26.3.3", "v26.3.3", true, []string{"installed by helm"}},
			{"NVIDIA's v26.7.0 CRD is kept under --operator-version v25.10.1", latest, "v25.10.1", "v25.10.1", true, []string{"installed by helm"}},
			{"NVIDIA's v26.3.3 CRD is kept under --operator-version v25.10.1", "v26.3.3", "v25.10.1", "v25.10.1", true, []string{"installed by helm"}},
		} {
			t.Run(name+": "+tc.name, func(t *testing.T) {
				have, want := helm(readChartCRD(t, tc.theirs, name)), readChartCRD(t, tc.ours, name)
				got := keepReasonT(t, have, want, tc.oursVersion, releases)
				if (got != "") != tc.kept {
					t.Fatalf("keepReason = %q, want kept=%v", got, tc.kept)
				}
				for _, s := range tc.wantInReasons {
					if !strings.Contains(got, s) {
						t.Errorf("keepReason = %q, want it to say %q", got, s)
					}
				}
				if tc.kept {
					t.Logf("%s", got)
				}
			})
		}
	}
}
