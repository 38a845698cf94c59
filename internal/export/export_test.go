package export

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// offlinePlan is the Plan `gpuctl template --profile` builds, with the options given.
func offlinePlan(t *testing.T, o engine.InstallOptions) *plan.Plan {
	t.Helper()
	p, err := (&engine.Template{Options: o}).Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// decode splits a stream into its documents, each decoded.
func decode(t *testing.T, stream []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	dec := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for {
		raw, err := dec.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := sigsyaml.Unmarshal(raw, &obj); err != nil {
			t.Fatalf("a document is not YAML: %v\n%s", err, raw)
		}
		if obj != nil {
			out = append(out, obj)
		}
	}
}

// normalized is v as JSON decodes it, so that values built in Go and values read back compare.
func normalized(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func at(m map[string]any, path ...string) any {
	var v any = m
	for _, k := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

var cases = []struct {
	engine    Engine
	profile   string
	chartRepo string
}{
	{Flux, "gke", "oci://registry.example.com/gpuctl/charts"},
	{Flux, "kubeadm", "https://charts.example.com/gpuctl"},
	{ArgoCD, "gke", "oci://registry.example.com/gpuctl/charts"},
	{ArgoCD, "kubeadm", "https://charts.example.com/gpuctl"},
}

func TestGolden(t *testing.T) {
	for _, tc := range cases {
		t.Run(string(tc.engine)+" on "+tc.profile+" matches its golden file", func(t *testing.T) {
			p := offlinePlan(t, engine.InstallOptions{Profile: tc.profile})
			res, err := (&Export{Engine: tc.engine, ChartRepo: tc.chartRepo}).Run(p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := res.Stream()
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", string(tc.engine)+"-"+tc.profile+".yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("export differs from %s (go test ./internal/export -update rewrites it):\n%s", golden, got)
			}
		})
	}
}

// TestDocuments decodes every exported document and compares the releases' values with the Plan's.
func TestDocuments(t *testing.T) {
	for _, tc := range cases {
		t.Run(string(tc.engine)+" on "+tc.profile+": every document is an object and every release has the plan's values, in order", func(t *testing.T) {
			p := offlinePlan(t, engine.InstallOptions{Profile: tc.profile, Set: []string{"driver.version=580.1.2", "node-feature-discovery.worker.config.sources.pci.deviceLabelFields={vendor,device}"}, Registry: "mirror.example.com"})
			res, err := (&Export{Engine: tc.engine, ChartRepo: tc.chartRepo}).Run(p)
			if err != nil {
				t.Fatal(err)
			}
			stream, err := res.Stream()
			if err != nil {
				t.Fatal(err)
			}
			docs := decode(t, stream)
			if len(docs) != len(res.Documents) {
				t.Fatalf("%d documents decoded, %d written", len(docs), len(res.Documents))
			}
			var releases []*plan.Release
			for _, s := range p.Steps {
				if s.Kind == plan.KindRelease && s.Skip == "" {
					releases = append(releases, s.Release)
				}
			}
			if len(releases) < 2 {
				t.Fatalf("the plan has %d releases, want NFD and the operator", len(releases))
			}
			var seen []string
			firstRelease := -1
			for i, d := range docs {
				for _, k := range []string{"apiVersion", "kind"} {
					if s, _ := d[k].(string); s == "" {
						t.Errorf("document %d has no %s", i, k)
					}
				}
				if s, _ := at(d, "metadata", "name").(string); s == "" {
					t.Errorf("document %d has no metadata.name", i)
				}
				var values any
				switch d["kind"] {
				case "HelmRelease":
					values = at(d, "spec", "values")
					if at(d, "spec", "install", "crds") != "CreateReplace" || at(d, "spec", "upgrade", "crds") != "CreateReplace" {
						t.Errorf("HelmRelease %v: crds policy is not CreateReplace: %v", at(d, "metadata", "name"), at(d, "spec"))
					}
				case "Application":
					values = at(d, "spec", "source", "helm", "valuesObject")
					if at(d, "spec", "source", "helm", "skipCrds") != true {
						t.Errorf("Application %v does not skip its chart's CRDs", at(d, "metadata", "name"))
					}
				default:
					if firstRelease >= 0 {
						t.Errorf("document %d (%v) comes after a release: plain objects and CRDs come first", i, d["kind"])
					}
					continue
				}
				if firstRelease < 0 {
					firstRelease = i
				}
				n := len(seen)
				if n >= len(releases) {
					t.Fatalf("more release objects than the plan's %d releases", len(releases))
				}
				rel := releases[n]
				if name := at(d, "metadata", "name"); name != rel.Name {
					t.Errorf("release object %d is %v, want %s (the plan's order)", n, name, rel.Name)
				}
				if !reflect.DeepEqual(normalized(t, values), normalized(t, rel.Values)) {
					t.Errorf("values of %s differ from the plan's:\n got %v\nwant %v", rel.Name, values, rel.Values)
				}
				seen = append(seen, rel.Name)
			}
			if len(seen) != len(releases) {
				t.Errorf("exported releases %v, the plan has %d", seen, len(releases))
			}
			// The values the user set are there (the comparison above would pass on two empty maps).
			if !strings.Contains(string(stream), "580.1.2") || !strings.Contains(string(stream), "mirror.example.com") {
				t.Errorf("the export lacks --set driver.version or --registry")
			}
		})
	}
}

func TestOrder(t *testing.T) {
	p := offlinePlan(t, engine.InstallOptions{Profile: "gke"})
	t.Run("flux: the operator's HelmRelease depends on NFD's", func(t *testing.T) {
		res, err := (&Export{Engine: Flux, ChartRepo: "https://c.example.com"}).Run(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range res.Documents {
			if d.Object["kind"] == "HelmRelease" && at(d.Object, "metadata", "name") == plan.OperatorRelease {
				deps := normalized(t, at(d.Object, "spec", "dependsOn"))
				want := normalized(t, []any{map[string]any{"name": plan.NFDRelease, "namespace": p.Namespace}})
				if !reflect.DeepEqual(deps, want) {
					t.Errorf("dependsOn %v, want %v", deps, want)
				}
				return
			}
		}
		t.Fatal("no HelmRelease for the operator")
	})
	t.Run("argocd: plain objects, then CRDs, then NFD, then the operator, in rising sync waves", func(t *testing.T) {
		res, err := (&Export{Engine: ArgoCD, ChartRepo: "https://c.example.com"}).Run(p)
		if err != nil {
			t.Fatal(err)
		}
		wave := func(kind, name string) string {
			for _, d := range res.Documents {
				if d.Object["kind"] == kind && (name == "" || at(d.Object, "metadata", "name") == name) {
					w, _ := at(d.Object, "metadata", "annotations", argoWave).(string)
					return w
				}
			}
			t.Fatalf("no %s %s", kind, name)
			return ""
		}
		got := []string{wave("Namespace", ""), wave("ResourceQuota", ""), wave("CustomResourceDefinition", "clusterpolicies.nvidia.com"), wave("Application", plan.NFDRelease), wave("Application", plan.OperatorRelease)}
		if want := []string{"-2", "-2", "-1", "0", "1"}; !reflect.DeepEqual(got, want) {
			t.Errorf("waves %v, want %v", got, want)
		}
	})
}

func TestRefusals(t *testing.T) {
	t.Run("an OpenShift plan is refused as unsupported", func(t *testing.T) {
		p := offlinePlan(t, engine.InstallOptions{Profile: "openshift"})
		_, err := (&Export{Engine: Flux, ChartRepo: "https://c.example.com"}).Run(p)
		if !errors.Is(err, plan.ErrUnsupported) || !strings.Contains(err.Error(), "OLM Subscription") {
			t.Errorf("err = %v", err)
		}
	})
	for _, tc := range []struct {
		name string
		x    Export
		want string
	}{
		{"no engine", Export{ChartRepo: "https://c.example.com"}, "--for is required"},
		{"an engine not built yet", Export{Engine: "capi", ChartRepo: "https://c.example.com"}, "--for capi"},
		{"no chart repository", Export{Engine: Flux}, "--chart-repo is required"},
		{"a chart repository without a scheme", Export{Engine: ArgoCD, ChartRepo: "charts.example.com"}, "--chart-repo charts.example.com"},
		{"a file URL", Export{Engine: ArgoCD, ChartRepo: "file:///charts"}, "--chart-repo file:///charts"},
	} {
		t.Run(tc.name+" is an input error", func(t *testing.T) {
			var ie *InputError
			if err := tc.x.Validate(); !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want an *InputError naming %q", err, tc.want)
			}
		})
	}
}

func TestWriteDir(t *testing.T) {
	p := offlinePlan(t, engine.InstallOptions{Profile: "gke"})
	res, err := (&Export{Engine: Flux, ChartRepo: "https://c.example.com"}).Run(p)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, err := res.WriteDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"00-namespace-gpu-operator.yaml", "01-resourcequota-gpu-operator-quota.yaml", "02-helmrepository-gpuctl-charts.yaml",
		"03-helmrelease-node-feature-discovery.yaml", "04-helmrelease-gpu-operator.yaml"}
	var got []string
	for _, f := range files {
		got = append(got, filepath.Base(f))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if docs := decode(t, b); len(docs) != 1 {
			t.Errorf("%s holds %d objects, want 1", f, len(docs))
		}
	}
}

func TestPlainObjects(t *testing.T) {
	t.Run("on tkgs the PodSecurityPolicy RoleBinding gpuctl applies comes before the releases", func(t *testing.T) {
		p := offlinePlan(t, engine.InstallOptions{Profile: "tkgs"})
		res, err := (&Export{Engine: Flux, ChartRepo: "https://c.example.com"}).Run(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range res.Documents {
			switch d.Object["kind"] {
			case "HelmRelease":
				t.Fatal("a HelmRelease comes before the RoleBinding")
			case "RoleBinding":
				if !reflect.DeepEqual(normalized(t, d.Object), normalized(t, plan.PSPBinding(p.Namespace))) {
					t.Errorf("RoleBinding %v, want the one gpuctl applies", d.Object)
				}
				return
			}
		}
		t.Fatal("no RoleBinding")
	})
	t.Run("the export does not share maps with the plan", func(t *testing.T) {
		p := offlinePlan(t, engine.InstallOptions{Profile: "gke"})
		res, err := (&Export{Engine: ArgoCD, ChartRepo: "https://c.example.com"}).Run(p)
		if err != nil {
			t.Fatal(err)
		}
		if ns := p.Step("namespace").Objects[0]["metadata"].(map[string]any); ns["annotations"] != nil {
			t.Errorf("annotating the export changed the plan's namespace: %v", ns)
		}
		if len(res.Documents) == 0 {
			t.Fatal("no documents")
		}
	})
}
