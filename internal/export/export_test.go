package export

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"text/template"

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

type exportCase struct {
	engine    Engine
	fleet     bool
	profile   string
	chartRepo string
}

// name is the case's engine as the golden file names it ("argocd-fleet").
func (c exportCase) name() string {
	if c.fleet {
		return string(c.engine) + "-fleet"
	}
	return string(c.engine)
}

func (c exportCase) export() *Export {
	x := &Export{Engine: c.engine, ChartRepo: c.chartRepo, Fleet: c.fleet}
	if c.fleet {
		x.ClusterSelector = map[string]string{"gpuctl.io/fleet": "gpu"}
	}
	return x
}

var cases = []exportCase{
	{Flux, false, "gke", "oci://registry.example.com/gpuctl/charts"},
	{Flux, false, "kubeadm", "https://charts.example.com/gpuctl"},
	{ArgoCD, false, "gke", "oci://registry.example.com/gpuctl/charts"},
	{ArgoCD, false, "kubeadm", "https://charts.example.com/gpuctl"},
	{ArgoCD, true, "gke", "oci://registry.example.com/gpuctl/charts"},
	{ArgoCD, true, "kubeadm", "https://charts.example.com/gpuctl"},
	{RKE2, false, "rke2", "oci://registry.example.com/gpuctl/charts"},
	{RKE2, false, "kubeadm", "https://charts.example.com/gpuctl"},
}

func TestGolden(t *testing.T) {
	for _, tc := range cases {
		t.Run(tc.name()+" on "+tc.profile+" matches its golden file", func(t *testing.T) {
			p := offlinePlan(t, engine.InstallOptions{Profile: tc.profile})
			_, got := exportStream(t, tc.export(), p)
			golden := filepath.Join("testdata", tc.name()+"-"+tc.profile+".yaml")
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
		t.Run(tc.name()+" on "+tc.profile+": every document is an object and every release has the plan's values, in order", func(t *testing.T) {
			p := offlinePlan(t, engine.InstallOptions{Profile: tc.profile, Set: []string{"driver.version=580.1.2", "node-feature-discovery.worker.config.sources.pci.deviceLabelFields={vendor,device}"}, Registry: "mirror.example.com"})
			res, stream := exportStream(t, tc.export(), p)
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
				case "ApplicationSet":
					values = at(d, "spec", "template", "spec", "source", "helm", "valuesObject")
					if at(d, "spec", "template", "spec", "source", "helm", "skipCrds") != false {
						t.Errorf("ApplicationSet %v skips its chart's CRDs: no other object brings them to the fleet's clusters", at(d, "metadata", "name"))
					}
				case "HelmChart":
					content, _ := at(d, "spec", "valuesContent").(string)
					var v map[string]any
					if err := sigsyaml.Unmarshal([]byte(content), &v); err != nil {
						t.Fatalf("HelmChart %v: valuesContent is not YAML: %v", at(d, "metadata", "name"), err)
					}
					values = v
					if ns := at(d, "metadata", "namespace"); ns != "kube-system" {
						t.Errorf("HelmChart %v in namespace %v, want kube-system (the helm-controller's)", at(d, "metadata", "name"), ns)
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
		{"Cluster API, whose CRDs cannot be validated against,", Export{Engine: CAPI, ChartRepo: "https://c.example.com"}, "--for capi: not exported"},
		{"an unknown engine", Export{Engine: "fleet", ChartRepo: "https://c.example.com"}, "--for fleet: must be flux, argocd or rke2"},
		{"a fleet of Flux", Export{Engine: Flux, Fleet: true, ChartRepo: "https://c.example.com"}, "--fleet is for --for argocd"},
		{"a cluster selector without a fleet", Export{Engine: ArgoCD, ClusterSelector: map[string]string{"a": "b"}, ChartRepo: "https://c.example.com"}, "it needs --fleet"},
		{"a cluster selector that is no label", Export{Engine: ArgoCD, Fleet: true, ClusterSelector: map[string]string{"a b": "c"}, ChartRepo: "https://c.example.com"}, "--cluster-selector a b=c"},
		{"no chart repository", Export{Engine: Flux}, "--chart-repo is required"},
		{"a chart repository without a scheme", Export{Engine: ArgoCD, ChartRepo: "charts.example.com"}, "--chart-repo charts.example.com"},
		{"a file URL", Export{Engine: ArgoCD, ChartRepo: "file:///charts"}, "--chart-repo file:///charts"},
		{"plain HTTP for an http chart repository", Export{Engine: Flux, PlainHTTP: true, ChartRepo: "http://c.example.com"}, "--plain-http is for an oci:// registry"},
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

func TestFleetAndRKE2(t *testing.T) {
	t.Run("a fleet's Applications create the namespace with the plan's Pod Security labels", func(t *testing.T) {
		p := offlinePlan(t, engine.InstallOptions{Profile: "kubeadm"})
		res, err := (&Export{Engine: ArgoCD, Fleet: true, ChartRepo: "https://c.example.com"}).Run(p)
		if err != nil {
			t.Fatal(err)
		}
		want := normalized(t, at(p.Step("namespace").Objects[0], "metadata", "labels"))
		n := 0
		for _, d := range res.Documents {
			switch d.Object["kind"] {
			case "CustomResourceDefinition":
				t.Errorf("a fleet export writes CRD %v for the Argo CD cluster; the Applications bring them", at(d.Object, "metadata", "name"))
			case "ApplicationSet":
				n++
				sp := at(d.Object, "spec", "template", "spec", "syncPolicy").(map[string]any)
				if got := normalized(t, at(sp, "managedNamespaceMetadata", "labels")); !reflect.DeepEqual(got, want) || !strings.Contains(strings.Join(toStrings(sp["syncOptions"]), ","), "CreateNamespace=true") {
					t.Errorf("ApplicationSet %v: syncPolicy %v, want CreateNamespace with labels %v", at(d.Object, "metadata", "name"), sp, want)
				}
				if at(d.Object, "spec", "generators") == nil || at(d.Object, "spec", "goTemplate") != true {
					t.Errorf("ApplicationSet %v has no generator or no goTemplate", at(d.Object, "metadata", "name"))
				}
			}
		}
		if n != 2 {
			t.Errorf("%d ApplicationSets, want NFD's and the operator's", n)
		}
	})
	t.Run("a value with {{ reaches the Application unchanged through the ApplicationSet's Go template", func(t *testing.T) {
		in := map[string]any{"a{{k": []any{"x {{ .name }} y", 3}, "plain": "v"}
		// Argo CD renders each string of the template on its own (applicationset/utils.Render).
		var render func(v any) any
		render = func(v any) any {
			switch x := v.(type) {
			case string:
				tpl, err := template.New("v").Option("missingkey=error").Parse(x)
				if err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				if err := tpl.Execute(&b, map[string]any{"name": "cluster-a"}); err != nil {
					t.Fatal(err)
				}
				return b.String()
			case map[string]any:
				out := map[string]any{}
				for k, e := range x {
					out[render(k).(string)] = render(e)
				}
				return out
			case []any:
				var out []any
				for _, e := range x {
					out = append(out, render(e))
				}
				return out
			}
			return v
		}
		rendered := render(escapeGoTemplate(in))
		if !reflect.DeepEqual(rendered, in) {
			t.Errorf("rendered %v, want %v", rendered, in)
		}
	})
	t.Run("rke2: plain objects and CRDs come before the HelmCharts, which install from the chart repository", func(t *testing.T) {
		p := offlinePlan(t, engine.InstallOptions{Profile: "tkgs"})
		for _, repo := range []string{"https://c.example.com/charts", "oci://r.example.com/gpuctl"} {
			res, err := (&Export{Engine: RKE2, ChartRepo: repo}).Run(p)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, d := range res.Documents {
				k := d.Object["kind"].(string)
				if len(kinds) == 0 || kinds[len(kinds)-1] != k {
					kinds = append(kinds, k)
				}
				if k != "HelmChart" {
					continue
				}
				name := at(d.Object, "metadata", "name").(string)
				chart := at(d.Object, "spec", "chart")
				if strings.HasPrefix(repo, "oci://") {
					if at(d.Object, "spec", "repo") != nil || !strings.HasPrefix(chart.(string), repo+"/") {
						t.Errorf("HelmChart %s from OCI: chart %v repo %v", name, chart, at(d.Object, "spec", "repo"))
					}
				} else if at(d.Object, "spec", "repo") != repo || chart == "" {
					t.Errorf("HelmChart %s: chart %v repo %v, want repo %s", name, chart, at(d.Object, "spec", "repo"), repo)
				}
				if at(d.Object, "spec", "targetNamespace") != p.Namespace || at(d.Object, "spec", "failurePolicy") != "retry" {
					t.Errorf("HelmChart %s: spec %v", name, d.Object["spec"])
				}
			}
			if want := []string{"Namespace", "RoleBinding", "CustomResourceDefinition", "HelmChart"}; !reflect.DeepEqual(kinds, want) {
				t.Errorf("kinds in order %v, want %v", kinds, want)
			}
		}
	})
}

func toStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func TestPlainHTTP(t *testing.T) {
	p := offlinePlan(t, engine.InstallOptions{Profile: "gke"})
	for _, tc := range []struct {
		x Export
		// field is where the engine's object says "no TLS", header what the header says instead.
		kind   string
		field  []string
		header string
	}{
		{Export{Engine: Flux}, "HelmRepository", []string{"spec", "insecure"}, ""},
		{Export{Engine: RKE2}, "HelmChart", []string{"spec", "plainHTTP"}, ""},
		{Export{Engine: ArgoCD}, "", nil, "insecureOCIForceHttp true"},
		{Export{Engine: ArgoCD, Fleet: true}, "", nil, "insecureOCIForceHttp true"},
	} {
		for _, plain := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s fleet=%v plain-http=%v", tc.x.Engine, tc.x.Fleet, plain), func(t *testing.T) {
				x := tc.x
				x.ChartRepo, x.PlainHTTP = "oci://127.0.0.1:5000/gpuctl", plain
				res, err := x.Run(p)
				if err != nil {
					t.Fatal(err)
				}
				if tc.header != "" {
					if got := strings.Contains(strings.Join(res.Header, "\n"), tc.header); got != plain {
						t.Errorf("header names %q: %v, want %v:\n%s", tc.header, got, plain, strings.Join(res.Header, "\n"))
					}
					return
				}
				n := 0
				for _, d := range res.Documents {
					if d.Object["kind"] != tc.kind {
						continue
					}
					n++
					v := at(d.Object, tc.field...)
					if (v == true) != plain {
						t.Errorf("%s %v: %s = %v, want it set only with plain HTTP", tc.kind, at(d.Object, "metadata", "name"), strings.Join(tc.field, "."), v)
					}
				}
				if n == 0 {
					t.Fatalf("no %s in the export", tc.kind)
				}
			})
		}
	}
}

// exportStream runs x on p and returns the result and its YAML stream.
func exportStream(t *testing.T, x *Export, p *plan.Plan) (*Result, []byte) {
	t.Helper()
	res, err := x.Run(p)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := res.Stream()
	if err != nil {
		t.Fatal(err)
	}
	return res, stream
}
