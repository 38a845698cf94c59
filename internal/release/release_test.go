package release

import (
	"context"
	"io"
	"maps"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/gpuctl/gpuctl/internal/detect"
)

// newTestClient is a Client over Helm's in-memory storage and a Kubernetes client that accepts
// everything, as Helm's own action tests use.
func newTestClient(t *testing.T) *Client {
	t.Helper()
	cfg := action.NewConfiguration()
	cfg.Releases = storage.Init(driver.NewMemory())
	cfg.KubeClient = &kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}}
	cfg.Capabilities = common.DefaultCapabilities
	return NewWithConfiguration(cfg, "gpu-operator")
}

func testChart(version string) *chart.Chart {
	return &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: "v2", Name: "demo", Version: version, AppVersion: "v1"},
		Templates: []*common.File{{Name: "templates/cm.yaml", Data: []byte(
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\ndata:\n  x: {{ .Values.x | quote }}\n")}},
		Values: map[string]any{"x": "default", "y": 1},
	}
}

func apply(t *testing.T, c *Client, ch *chart.Chart, vals map[string]any) *Result {
	t.Helper()
	res, err := (&Apply{Client: c, Name: "demo", Chart: ch, Values: vals, RunID: thisRun}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func revisions(t *testing.T, c *Client) []string {
	t.Helper()
	h, err := c.History("demo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range h {
		out = append(out, r.Status)
	}
	return out
}

func TestApply(t *testing.T) {
	t.Run("the first apply installs revision 1 without CRDs, labelled as gpuctl's", func(t *testing.T) {
		c := newTestClient(t)
		res := apply(t, c, testChart("1.0.0"), map[string]any{"x": "a"})
		if res.Outcome != Installed || res.Release.Revision != 1 || res.Release.Status != "deployed" {
			t.Fatalf("got %s revision %d %s", res.Outcome, res.Release.Revision, res.Release.Status)
		}
		if !strings.Contains(res.Manifest, `x: "a"`) {
			t.Errorf("values not rendered: %s", res.Manifest)
		}
		r, _ := c.cfg.Releases.Last("demo")
		if r.(*releasev1.Release).Labels[detect.ManagedReleaseLabel] != "true" {
			t.Errorf("release labels %v lack %s", r.(*releasev1.Release).Labels, detect.ManagedReleaseLabel)
		}
	})

	t.Run("the same chart and values again change nothing and make no new revision", func(t *testing.T) {
		c := newTestClient(t)
		apply(t, c, testChart("1.0.0"), map[string]any{"x": "a", "n": 1})
		// Values that went through YAML or JSON on the way (1 vs 1.0) are the same values.
		res := apply(t, c, testChart("1.0.0"), map[string]any{"x": "a", "n": 1.0})
		if res.Outcome != Unchanged {
			t.Fatalf("outcome %s, want unchanged", res.Outcome)
		}
		if got := revisions(t, c); len(got) != 1 {
			t.Errorf("revisions %v, want one", got)
		}
	})

	t.Run("new values upgrade, and values of the previous revision do not leak into it", func(t *testing.T) {
		c := newTestClient(t)
		apply(t, c, testChart("1.0.0"), map[string]any{"x": "a", "old": true})
		res := apply(t, c, testChart("1.0.0"), map[string]any{"x": "b"})
		if res.Outcome != Upgraded || res.Release.Revision != 2 {
			t.Fatalf("got %s revision %d", res.Outcome, res.Release.Revision)
		}
		if _, leaked := res.Release.Values["old"]; leaked {
			t.Errorf("values %v kept a key of revision 1", res.Release.Values)
		}
		if got := revisions(t, c); strings.Join(got, ",") != "superseded,deployed" {
			t.Errorf("revisions %v", got)
		}
	})

	t.Run("a new chart version upgrades even with the same values", func(t *testing.T) {
		c := newTestClient(t)
		apply(t, c, testChart("1.0.0"), map[string]any{"x": "a"})
		if res := apply(t, c, testChart("1.1.0"), map[string]any{"x": "a"}); res.Outcome != Upgraded {
			t.Fatalf("outcome %s", res.Outcome)
		}
	})

	t.Run("an upgrade left pending by an interrupted run is rolled back, then applied", func(t *testing.T) {
		c := newTestClient(t)
		apply(t, c, testChart("1.0.0"), map[string]any{"x": "a"})
		stuck := pendingCopy(t, c, rcommon.StatusPendingUpgrade, deadRun)
		res := apply(t, c, testChart("1.0.0"), map[string]any{"x": "b"})
		if !strings.Contains(res.Recovered, "pending-upgrade") || !strings.Contains(res.Recovered, "rolled back to revision 1") {
			t.Errorf("recovered = %q", res.Recovered)
		}
		if res.Outcome != Upgraded || res.Release.Status != "deployed" {
			t.Errorf("got %s %s", res.Outcome, res.Release.Status)
		}
		h, _ := c.History("demo")
		for _, r := range h {
			if r.Revision == stuck && r.Status != "failed" {
				t.Errorf("the interrupted revision %d is %s, want failed", stuck, r.Status)
			}
		}
	})

	t.Run("an install left pending with nothing deployed is removed and installed again", func(t *testing.T) {
		c := newTestClient(t)
		rel := &releasev1.Release{Name: "demo", Namespace: "gpu-operator", Version: 1, Chart: testChart("1.0.0"),
			Info:   &releasev1.Info{Status: rcommon.StatusPendingInstall, LastDeployed: time.Now().Add(-time.Minute)},
			Labels: gpuctlLabels(deadRun, 1)}
		if err := c.cfg.Releases.Create(rel); err != nil {
			t.Fatal(err)
		}
		res := apply(t, c, testChart("1.0.0"), map[string]any{"x": "a"})
		if res.Outcome != Installed || !strings.Contains(res.Recovered, "pending-install") {
			t.Errorf("outcome %s, recovered %q", res.Outcome, res.Recovered)
		}
		if got := revisions(t, c); len(got) != 1 || got[0] != "deployed" {
			t.Errorf("revisions %v, want one deployed", got)
		}
	})

	t.Run("dry run writes no release", func(t *testing.T) {
		c := newTestClient(t)
		res, err := (&Apply{Client: c, Name: "demo", Chart: testChart("1.0.0"), DryRun: true}).Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != WouldInstall {
			t.Errorf("outcome %s", res.Outcome)
		}
		if last, _ := c.Last("demo"); last != nil {
			t.Errorf("dry run stored revision %d", last.Revision)
		}
	})
}

// pendingCopy stores a copy of the newest revision as the next revision in the given pending state,
// as an interrupted upgrade leaves it, and returns its revision number. run is the gpuctl run that
// wrote it, labelled as gpuctl labels its revisions; "": another tool (helm), whose upgrade keeps the
// previous revision's labels as they are.
func pendingCopy(t *testing.T, c *Client, status rcommon.Status, run string) int {
	t.Helper()
	last, err := c.last("demo")
	if err != nil {
		t.Fatal(err)
	}
	next := *last
	info := *last.Info
	next.Info = &info
	next.Version = last.Version + 1
	next.Info.Status = status
	next.Labels = maps.Clone(last.Labels)
	if run != "" {
		next.Labels = gpuctlLabels(run, next.Version)
	}
	if err := c.cfg.Releases.Create(&next); err != nil {
		t.Fatal(err)
	}
	return next.Version
}

// gpuctlLabels are the labels of a revision gpuctl run wrote as revision rev.
func gpuctlLabels(run string, rev int) map[string]string {
	return map[string]string{detect.ManagedReleaseLabel: "true", RunLabel: runLabel(run), RevisionLabel: strconv.Itoa(rev)}
}

func TestLoadChart(t *testing.T) {
	fsys := fstest.MapFS{
		"charts/demo/Chart.yaml":          {Data: []byte("apiVersion: v2\nname: demo\nversion: 0.1.0\n")},
		"charts/demo/values.yaml":         {Data: []byte("x: 1\n")},
		"charts/demo/templates/_h.tpl":    {Data: []byte(`{{- define "n" }}demo{{ end }}`)},
		"charts/demo/templates/cm.yaml":   {Data: []byte("kind: ConfigMap\n")},
		"charts/demo/crds/thing.crd.yaml": {Data: []byte("kind: CustomResourceDefinition\n")},
	}
	ch, err := LoadChart(fsys, "charts/demo")
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Name != "demo" || len(ch.Templates) != 2 || len(ch.CRDObjects()) != 1 || ch.Values["x"] != float64(1) && ch.Values["x"] != 1 {
		t.Errorf("loaded %s with %d templates, %d CRDs, values %v", ch.Metadata.Name, len(ch.Templates), len(ch.CRDObjects()), ch.Values)
	}
}

func TestLoadChartRelease(t *testing.T) {
	fsys := fstest.MapFS{
		"c/Chart.yaml":                           {Data: []byte("apiVersion: v2\nname: op\nversion: 2.0.0\nappVersion: v2.0.0\n")},
		"c/templates/cm.yaml":                    {Data: []byte("kind: ConfigMap\n")},
		"c/crds/new.yaml":                        {Data: []byte("kind: CustomResourceDefinition\n# v2\n")},
		"c/crds/extra.yaml":                      {Data: []byte("kind: CustomResourceDefinition\n# v2 only\n")},
		"c/releases/v1.0.0/crds/new.yaml":        {Data: []byte("kind: CustomResourceDefinition\n# v1\n")},
		"c/releases/v1.0.0/NOTES-for-reader.txt": {Data: []byte("not part of the chart\n")},
	}
	t.Run("as written it is the chart's own release, without releases/", func(t *testing.T) {
		for _, v := range []string{"", "v2.0.0"} {
			ch, err := LoadChartRelease(fsys, "c", v)
			if err != nil {
				t.Fatal(err)
			}
			if ch.Metadata.AppVersion != "v2.0.0" || len(ch.CRDObjects()) != 2 {
				t.Errorf("%q: appVersion %s, %d CRDs", v, ch.Metadata.AppVersion, len(ch.CRDObjects()))
			}
			for _, f := range ch.Files {
				if strings.HasPrefix(f.Name, "releases/") {
					t.Errorf("%q: %s is in the loaded chart", v, f.Name)
				}
			}
		}
	})
	t.Run("another release gets its own CRDs and version", func(t *testing.T) {
		ch, err := LoadChartRelease(fsys, "c", "v1.0.0")
		if err != nil {
			t.Fatal(err)
		}
		crds := ch.CRDObjects()
		if len(crds) != 1 || crds[0].Name != "crds/new.yaml" || !strings.Contains(string(crds[0].File.Data), "# v1") {
			t.Fatalf("CRDs = %+v", crds)
		}
		if ch.Metadata.AppVersion != "v1.0.0" || ch.Metadata.Version != "1.0.0" {
			t.Errorf("metadata %s %s", ch.Metadata.Version, ch.Metadata.AppVersion)
		}
		for _, f := range ch.Files {
			if strings.Contains(f.Name, "NOTES-for-reader") {
				t.Errorf("%s is in the loaded chart", f.Name)
			}
		}
	})
	t.Run("a release the chart has nothing for is refused", func(t *testing.T) {
		if _, err := LoadChartRelease(fsys, "c", "v9.9.9"); err == nil || !strings.Contains(err.Error(), "nothing for release v9.9.9") {
			t.Fatalf("err = %v", err)
		}
	})
}
