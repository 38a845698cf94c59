package charts

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/e2e/upstream"
	"github.com/gpuctl/gpuctl/internal/bundle"
	gpurelease "github.com/gpuctl/gpuctl/internal/release"
)

// crdVersion is one served version of a CRD from the charts, with its structural schema.
type crdVersion struct {
	crd        *apiextensionsv1.CustomResourceDefinition
	version    apiextensionsv1.CustomResourceDefinitionVersion
	structural *schema.Structural
}

// loadCRDs reads every CRD of both charts as written (the gpu-operator chart's are the default
// release's), keyed by "<group>/<version>/<Kind>". It fails the test on anything the API server would
// refuse to register: unknown fields, a non-structural schema.
func loadCRDs(t *testing.T) map[string]crdVersion {
	t.Helper()
	out := map[string]crdVersion{}
	for _, name := range Names() {
		addCRDs(t, name, mustLoad(t, name), out)
	}
	return out
}

// loadReleaseCRDs reads the gpu-operator chart's CRDs as gpuctl loads them for one GPU Operator
// release (releases/<tag>/crds/ in place of crds/ for a release other than the default).
func loadReleaseCRDs(t *testing.T, tag string) map[string]crdVersion {
	t.Helper()
	ch, err := gpurelease.LoadChartRelease(FS, gpuChart, tag)
	if err != nil {
		t.Fatalf("load %s for %s: %v", gpuChart, tag, err)
	}
	out := map[string]crdVersion{}
	addCRDs(t, gpuChart+"@"+tag, ch, out)
	return out
}

func addCRDs(t *testing.T, name string, ch *chart.Chart, out map[string]crdVersion) {
	t.Helper()
	for _, f := range ch.CRDObjects() {
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

// releaseTags is gpuctl's catalog of GPU Operator releases.
func releaseTags() []string {
	var out []string
	for _, b := range bundle.List() {
		out = append(out, b.Version)
	}
	return out
}

// operatorCRDs are the CRDs each release's controller watches, so needs at start (it exits when one is
// missing): cmd/gpu-operator/main.go and controllers/ at each tag. v26.7.0 added GPUCluster, which its
// GPUCluster, ClusterPolicy, NVIDIADriver and upgrade controllers watch.
var operatorCRDs = map[string][]string{
	"v26.7.0":  {"nvidia.com/v1/ClusterPolicy", "nvidia.com/v1alpha1/GPUCluster", "nvidia.com/v1alpha1/NVIDIADriver"},
	"v26.3.3":  {"nvidia.com/v1/ClusterPolicy", "nvidia.com/v1alpha1/NVIDIADriver"},
	"v25.10.1": {"nvidia.com/v1/ClusterPolicy", "nvidia.com/v1alpha1/NVIDIADriver"},
}

func TestCRDsAreStructuralAndComplete(t *testing.T) {
	sets := map[string]map[string]crdVersion{"as written": loadCRDs(t)}
	for _, tag := range releaseTags() {
		sets["gpu-operator "+tag] = loadReleaseCRDs(t, tag)
	}
	want := map[string]map[string]apiextensionsv1.ResourceScope{
		"as written": {
			"nfd.k8s-sigs.io/v1alpha1/NodeFeature":      apiextensionsv1.NamespaceScoped,
			"nfd.k8s-sigs.io/v1alpha1/NodeFeatureRule":  apiextensionsv1.ClusterScoped,
			"nfd.k8s-sigs.io/v1alpha1/NodeFeatureGroup": apiextensionsv1.NamespaceScoped,
		},
	}
	for _, tag := range releaseTags() {
		want["gpu-operator "+tag] = map[string]apiextensionsv1.ResourceScope{}
		for _, key := range operatorCRDs[tag] {
			want["gpu-operator "+tag][key] = apiextensionsv1.ClusterScoped
		}
	}
	for set, kinds := range want {
		for key, scope := range kinds {
			t.Run(set+" "+key, func(t *testing.T) {
				c, ok := sets[set][key]
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
				// The GPU Operator writes the status of its objects with Status().Update.
				if c.crd.Spec.Group == "nvidia.com" && (c.version.Subresources == nil || c.version.Subresources.Status == nil) {
					t.Error("no status subresource")
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
	}
}

// TestEachReleaseHasTheCRDsItsControllerNeeds: the chart loaded for a release carries exactly the
// nvidia.com CRDs that release's controller watches: none missing (the controller would exit, as
// v26.7.0's does without GPUCluster) and none of another release. Where NVIDIA's sources are at hand,
// the list is checked against the kinds the controllers watch (source.Kind in controllers/*.go).
func TestEachReleaseHasTheCRDsItsControllerNeeds(t *testing.T) {
	if got, want := slices.Sorted(maps.Keys(operatorCRDs)), slices.Sorted(slices.Values(releaseTags())); !slices.Equal(got, want) {
		t.Fatalf("operatorCRDs covers releases %v, the catalog has %v", got, want)
	}
	for _, tag := range releaseTags() {
		t.Run(tag, func(t *testing.T) {
			var got []string
			for key := range loadReleaseCRDs(t, tag) {
				got = append(got, key)
			}
			slices.Sort(got)
			if !slices.Equal(got, operatorCRDs[tag]) {
				t.Errorf("the chart for %s has CRDs for %v, its controller needs %v", tag, got, operatorCRDs[tag])
			}
			t.Run("the controller watches exactly these kinds", func(t *testing.T) {
				tree := upstream.TreeT(t, tag)
				var kinds []string
				for _, k := range operatorCRDs[tag] {
					kinds = append(kinds, path.Base(k))
				}
				if watched := watchedAPIKinds(t, tree); !slices.Equal(watched, slices.Sorted(slices.Values(kinds))) {
					t.Errorf("controllers/ at %s watch %v of api/nvidia/, the chart serves %v", tag, watched, kinds)
				}
			})
		})
	}
}

// watchedAPIKinds lists the kinds of the operator's own api/nvidia/ packages that its controllers
// watch: `source.Kind(cache, &alias.Kind{}, …)` where alias imports one of those packages.
func watchedAPIKinds(t *testing.T, tree string) []string {
	t.Helper()
	imports := regexp.MustCompile(`(\w+)\s+"github.com/NVIDIA/gpu-operator/api/nvidia/v1\w*"`)
	watch := regexp.MustCompile(`source\.Kind\(\s*[^,]+,\s*&(\w+)\.(\w+)\{\}`)
	files, err := filepath.Glob(filepath.Join(tree, "controllers", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no controllers/*.go in %s: %v", tree, err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		aliases := map[string]bool{}
		for _, m := range imports.FindAllSubmatch(b, -1) {
			aliases[string(m[1])] = true
		}
		for _, m := range watch.FindAllSubmatch(b, -1) {
			if aliases[string(m[1])] {
				seen[string(m[2])] = true
			}
		}
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestCRDFilesAreGeneratedOnePerCRD: every CRD file of the gpu-operator chart comes from `make crds`
// for a release of the catalog (the default's in crds/, the others' in releases/<tag>/crds/) and holds
// one CRD, named <plural>.<group>.yaml. e2e's regeneration test proves the contents.
func TestCRDFilesAreGeneratedOnePerCRD(t *testing.T) {
	dirs := map[string]string{}
	for _, b := range bundle.List() {
		if b.Default {
			dirs[path.Join(gpuChart, "crds")] = b.Version
		} else {
			dirs[path.Join(gpuChart, gpurelease.ReleasesDir, b.Version, "crds")] = b.Version
		}
	}
	releases, err := fs.ReadDir(FS, path.Join(gpuChart, gpurelease.ReleasesDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range releases {
		if _, ok := dirs[path.Join(gpuChart, gpurelease.ReleasesDir, e.Name(), "crds")]; !ok {
			t.Errorf("%s/%s/%s belongs to no release of the catalog other than the default", gpuChart, gpurelease.ReleasesDir, e.Name())
		}
	}
	for dir, tag := range dirs {
		entries, err := fs.ReadDir(FS, dir)
		if err != nil {
			t.Errorf("%s: %v", tag, err)
			continue
		}
		for _, e := range entries {
			p := path.Join(dir, e.Name())
			b, err := fs.ReadFile(FS, p)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.SplitN(string(b), "\n", 2)[0], "Generated by `make crds`") || !strings.Contains(string(b), "NVIDIA/gpu-operator "+tag+" ") {
				t.Errorf("%s does not say it was generated by `make crds` from %s", p, tag)
			}
			if strings.Count(string(b), "\nkind: CustomResourceDefinition") != 1 {
				t.Errorf("%s does not hold exactly one CRD", p)
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.Unmarshal(b, crd); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if e.Name() != crd.Name+".yaml" {
				t.Errorf("%s holds %s", p, crd.Name)
			}
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

// TestStatusAcceptsWhatTheOperatorWrites: each release's controller writes status.state, the
// namespace and metav1.Conditions through the status subresource. The states are those its
// controllers set: ClusterPolicy ignored/ready/notReady (SetStatus in controllers/clusterpolicy_controller.go,
// every tag); NVIDIADriver ready/notReady, and disabled from v26.3.3 on (controllers/nvidiadriver_controller.go);
// GPUCluster ready/notReady/disabled (controllers/gpucluster_controller.go at v26.7.0).
func TestStatusAcceptsWhatTheOperatorWrites(t *testing.T) {
	states := map[string]map[string][]string{
		"v26.7.0": {
			"nvidia.com/v1/ClusterPolicy":      {"ignored", "ready", "notReady"},
			"nvidia.com/v1alpha1/NVIDIADriver": {"ready", "notReady", "disabled"},
			"nvidia.com/v1alpha1/GPUCluster":   {"ready", "notReady", "disabled"},
		},
		"v26.3.3": {
			"nvidia.com/v1/ClusterPolicy":      {"ignored", "ready", "notReady"},
			"nvidia.com/v1alpha1/NVIDIADriver": {"ready", "notReady", "disabled"},
		},
		"v25.10.1": {
			"nvidia.com/v1/ClusterPolicy":      {"ignored", "ready", "notReady"},
			"nvidia.com/v1alpha1/NVIDIADriver": {"ready", "notReady"},
		},
	}
	for _, tag := range releaseTags() {
		crds := loadReleaseCRDs(t, tag)
		if len(states[tag]) == 0 {
			t.Errorf("no states listed for %s", tag)
		}
		for key, list := range states[tag] {
			for _, state := range list {
				t.Run(tag+" "+key+" "+state, func(t *testing.T) {
					c, ok := crds[key]
					if !ok {
						t.Fatalf("no CRD serves %s", key)
					}
					apiVersion, kind, _ := strings.Cut(key[strings.Index(key, "/")+1:], "/")
					obj := map[string]any{
						"apiVersion": "nvidia.com/" + apiVersion,
						"kind":       kind,
						"metadata":   map[string]any{"name": "x"},
						"spec":       minimalSpec(c),
						"status": map[string]any{
							"state":     state,
							"namespace": "gpu-operator",
							"conditions": []any{map[string]any{
								"type": "Ready", "status": "True", "observedGeneration": int64(1),
								"lastTransitionTime": "2026-08-21T10:00:00Z", "reason": "Reconciled", "message": "",
							}},
						},
					}
					validateAgainstCRD(t, c, obj)
				})
			}
		}
	}
}

// minimal is the smallest value the schema accepts: objects with their required fields only, the
// first value of an enum, zero values otherwise (the operator's schemas carry no minimums on required
// fields).
func minimal(s *schema.Structural) any {
	if s.ValueValidation != nil && len(s.ValueValidation.Enum) > 0 {
		return s.ValueValidation.Enum[0].Object
	}
	switch s.Type {
	case "object":
		out := map[string]any{}
		if s.ValueValidation != nil {
			for _, name := range s.ValueValidation.Required {
				p := s.Properties[name]
				out[name] = minimal(&p)
			}
		}
		return out
	case "array":
		return []any{}
	case "string":
		return "x"
	case "boolean":
		return false
	case "integer", "number":
		return int64(0)
	}
	return map[string]any{}
}

func minimalSpec(c crdVersion) map[string]any {
	spec := c.structural.Properties["spec"]
	return minimal(&spec).(map[string]any)
}

// TestCRDsRejectWhatTheOperatorCannotUse: the generated schemas keep NVIDIA's validation (only the
// descriptions are left out): wrong types and values outside the operator's enums fail as they would
// on the API server, for every release.
func TestCRDsRejectWhatTheOperatorCannotUse(t *testing.T) {
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
	for _, tag := range releaseTags() {
		cp := loadReleaseCRDs(t, tag)["nvidia.com/v1/ClusterPolicy"]
		for _, tt := range tests {
			t.Run(tag+" "+tt.name, func(t *testing.T) {
				spec := minimalSpec(cp)
				tt.mutate(spec)
				obj := map[string]any{"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": map[string]any{"name": "x"}, "spec": spec}
				res := validate.NewSchemaValidator(cp.structural.ToKubeOpenAPI(), nil, "", strfmt.Default).Validate(obj)
				if len(res.Errors) == 0 {
					t.Error("the CRD schema accepts it")
				}
			})
		}
	}
}
