package export

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"text/template"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
)

// engineRelease is a release as an engine's object hands it to Helm: the release's name and
// namespace, the chart and version it pulls, and the values it passes.
type engineRelease struct {
	name, namespace, chart, version string
	values                          map[string]any
}

// asEngineSees reads a release object as its engine does: Flux's HelmRelease spec.values (the release
// in the HelmRelease's namespace unless targetNamespace), Argo CD's valuesObject (an ApplicationSet's
// after its Go template is rendered for a cluster), RKE2's valuesContent parsed as YAML (the release
// named as the HelmChart, in targetNamespace).
func asEngineSees(t *testing.T, d map[string]any) (engineRelease, bool) {
	t.Helper()
	str := func(path ...string) string { s, _ := at(d, path...).(string); return s }
	switch d["kind"] {
	case "HelmRelease":
		v, _ := at(d, "spec", "values").(map[string]any)
		return engineRelease{str("spec", "releaseName"), str("metadata", "namespace"), str("spec", "chart", "spec", "chart"), str("spec", "chart", "spec", "version"), v}, true
	case "Application":
		v, _ := at(d, "spec", "source", "helm", "valuesObject").(map[string]any)
		return engineRelease{str("spec", "source", "helm", "releaseName"), str("spec", "destination", "namespace"), str("spec", "source", "chart"), str("spec", "source", "targetRevision"), v}, true
	case "ApplicationSet":
		app, _ := goTemplate(t, at(d, "spec", "template"), map[string]any{"name": "cluster-a", "server": "https://cluster-a.example.com"}).(map[string]any)
		return asEngineSees(t, map[string]any{"kind": "Application", "spec": app["spec"]})
	case "HelmChart":
		var v map[string]any
		if err := sigsyaml.Unmarshal([]byte(str("spec", "valuesContent")), &v); err != nil {
			t.Fatalf("valuesContent: %v", err)
		}
		chart := str("spec", "chart")
		if i := strings.LastIndex(chart, "/"); strings.HasPrefix(chart, "oci://") && i >= 0 {
			chart = chart[i+1:]
		}
		return engineRelease{str("metadata", "name"), str("spec", "targetNamespace"), chart, str("spec", "version"), v}, true
	}
	return engineRelease{}, false
}

// goTemplate renders every string of v as Argo CD's ApplicationSet controller does with goTemplate
// (applicationset/utils.Render: each string on its own, keys included, missingkey=error).
func goTemplate(t *testing.T, v any, params map[string]any) any {
	t.Helper()
	switch x := v.(type) {
	case string:
		tpl, err := template.New("").Option("missingkey=error").Parse(x)
		if err != nil {
			t.Fatalf("template %q: %v", x, err)
		}
		var b strings.Builder
		if err := tpl.Execute(&b, params); err != nil {
			t.Fatalf("template %q: %v", x, err)
		}
		return b.String()
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[goTemplate(t, k, params).(string)] = goTemplate(t, e, params)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = goTemplate(t, e, params)
		}
		return out
	}
	return v
}

// renderKubeVersion is the cluster both renders are for (the charts require a recent Kubernetes).
const renderKubeVersion = "v1.34.0"

// TestEnginesRenderWhatGpuctlInstalls renders the embedded chart of every release object of every
// export with the values as its engine passes them to Helm, and compares the manifest with gpuctl's
// own render of the plan's release: byte for byte the same objects.
func TestEnginesRenderWhatGpuctlInstalls(t *testing.T) {
	ctx := context.Background()
	for _, profile := range []string{"gke", "kubeadm", "rke2"} {
		p := offlinePlan(t, engine.InstallOptions{Profile: profile, Registry: "mirror.example.com",
			Set: []string{"daemonsets.labels.team=gpu", "driver.version=580.1.2", "daemonsets.annotations.note=a {{ literal }} brace"}})
		want := map[string]string{}
		releases := map[string]*plan.Release{}
		for _, s := range p.Steps {
			if s.Kind != plan.KindRelease || s.Skip != "" {
				continue
			}
			rel := s.Release
			ch, err := render.LoadChart(rel.Chart, rel.AppVersion)
			if err != nil {
				t.Fatal(err)
			}
			m, err := (&release.Render{Name: rel.Name, Namespace: p.Namespace, Chart: ch, Values: rel.Values, KubeVersion: renderKubeVersion}).Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want[rel.Name], releases[rel.Name] = m, rel
		}
		for _, tc := range cases {
			scheme, _, _ := strings.Cut(tc.chartRepo, ":")
			t.Run(fmt.Sprintf("%s on %s from %s: Helm renders, with the exported values, the objects gpuctl installs", tc.name(), profile, scheme), func(t *testing.T) {
				_, stream := exportStream(t, tc.export(), p)
				n := 0
				for _, d := range decode(t, stream) {
					er, ok := asEngineSees(t, d)
					if !ok {
						continue
					}
					n++
					rel := releases[er.name]
					if rel == nil {
						t.Fatalf("%v names release %q, which the plan does not have", d["kind"], er.name)
					}
					if er.namespace != p.Namespace || er.chart != rel.Chart || er.version != rel.ChartVersion {
						t.Errorf("release %s: namespace %s, chart %s %s; gpuctl installs into %s from %s %s", er.name, er.namespace, er.chart, er.version, p.Namespace, rel.Chart, rel.ChartVersion)
					}
					ch, err := render.LoadChart(rel.Chart, rel.AppVersion)
					if err != nil {
						t.Fatal(err)
					}
					if ch.Metadata.Version != er.version {
						t.Errorf("the embedded chart %s is %s, the export pulls %s", rel.Chart, ch.Metadata.Version, er.version)
					}
					got, err := (&release.Render{Name: er.name, Namespace: er.namespace, Chart: ch, Values: er.values, KubeVersion: renderKubeVersion}).Run(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if got != want[er.name] {
						t.Errorf("release %s renders differently from what gpuctl installs (%d bytes, want %d)", er.name, len(got), len(want[er.name]))
					}
					if !strings.Contains(got, "a {{ literal }} brace") && er.name == plan.OperatorRelease {
						t.Errorf("release %s lost the value with braces", er.name)
					}
				}
				if n != len(releases) {
					t.Errorf("%d release objects, the plan has %d releases", n, len(releases))
				}
			})
		}
	}
}
