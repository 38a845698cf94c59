package release

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	hrelease "helm.sh/helm/v4/pkg/release"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/util/validation"
	kubefake "k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Run identities of the tests, as internal/lock makes them (host/pid/token): thisRun holds the Lease
// while the test applies; deadRun held it before and was killed.
const (
	thisRun = "node-a/4242/9f3c2a1b"
	deadRun = "node-b/77/0c0ffee0"
)

// seed stores revisions 1..n of the demo release in the given states, each written a minute apart
// and the last one a minute before now, by deadRun as gpuctl labels them; values x=a throughout.
func seed(t *testing.T, c *Client, states ...rcommon.Status) {
	t.Helper()
	start := time.Now().Add(-time.Duration(len(states)) * time.Minute)
	for i, st := range states {
		rel := &releasev1.Release{Name: "demo", Namespace: "gpu-operator", Version: i + 1, Chart: testChart("1.0.0"),
			Config:   map[string]any{"x": "a"},
			Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\ndata:\n  x: \"a\"\n",
			Info: &releasev1.Info{Status: st, FirstDeployed: start, LastDeployed: start.Add(time.Duration(i) * time.Minute),
				Description: "seeded"},
			Labels: gpuctlLabels(deadRun, i+1)}
		if st == rcommon.StatusPendingRollback { // gpuctl's rollback keeps its target's labels and names the run in its description
			rel.Labels = gpuctlLabels(deadRun, 1)
			rel.Info.RollbackRevision, rel.Info.Description = 1, rollbackDescription(1, deadRun)
		}
		if err := c.cfg.Releases.Create(rel); err != nil {
			t.Fatal(err)
		}
	}
}

func TestApplyNeverUninstallsADeployedRelease(t *testing.T) {
	const (
		dep  = rcommon.StatusDeployed
		sup  = rcommon.StatusSuperseded
		fail = rcommon.StatusFailed
		pi   = rcommon.StatusPendingInstall
		pu   = rcommon.StatusPendingUpgrade
		pr   = rcommon.StatusPendingRollback
	)
	for _, tc := range []struct {
		name      string
		history   []rcommon.Status
		values    map[string]any
		outcome   Outcome
		recovered string // substring; "" = nothing recovered
		// want is the history afterwards; its first len(history) revisions must all still be there.
		want string
	}{
		{
			name:    "a failed helm rollback after deployed revisions is upgraded, not reinstalled",
			history: []rcommon.Status{sup, dep, fail}, values: map[string]any{"x": "a"},
			outcome: Upgraded, want: "superseded,superseded,failed,deployed",
		},
		{
			name:    "a failed upgrade with new values is upgraded from the deployed revision",
			history: []rcommon.Status{dep, fail}, values: map[string]any{"x": "b"},
			outcome: Upgraded, want: "superseded,failed,deployed",
		},
		{
			name:    "a failed first install is upgraded, not uninstalled",
			history: []rcommon.Status{fail}, values: map[string]any{"x": "a"},
			outcome: Upgraded, want: "superseded,deployed",
		},
		{
			name:    "a pending upgrade after a deployed revision is rolled back to it, then upgraded",
			history: []rcommon.Status{dep, pu}, values: map[string]any{"x": "b"},
			outcome: Upgraded, recovered: "pending-upgrade by an interrupted run; rolled back to revision 1",
			want: "superseded,failed,superseded,deployed",
		},
		{
			name:    "a pending rollback whose only good revision is superseded is rolled back to that one",
			history: []rcommon.Status{sup, fail, pr}, values: map[string]any{"x": "a"},
			outcome: Unchanged, recovered: "rolled back to revision 1",
			want: "superseded,failed,failed,deployed",
		},
		{
			name:    "a pending install after earlier revisions is rolled back, never uninstalled",
			history: []rcommon.Status{sup, pi}, values: map[string]any{"x": "a"},
			outcome: Unchanged, recovered: "rolled back to revision 1",
			want: "superseded,failed,deployed",
		},
		{
			name:    "a pending upgrade after failed revisions only is marked failed and upgraded",
			history: []rcommon.Status{fail, pu}, values: map[string]any{"x": "a"},
			outcome: Upgraded, recovered: "marked it failed",
			want: "failed,superseded,deployed",
		},
		{
			name:    "a pending install with no revision before it is the one release replaced",
			history: []rcommon.Status{pi}, values: map[string]any{"x": "a"},
			outcome: Installed, recovered: "no revision before it; removed it and installed again",
			want: "deployed",
		},
		{
			name:    "two deployed revisions left by unlocked runs: the older is marked superseded",
			history: []rcommon.Status{dep, dep}, values: map[string]any{"x": "a"},
			outcome: Unchanged, want: "superseded,deployed",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(t)
			seed(t, c, tc.history...)
			res, err := (&Apply{Client: c, Name: "demo", Chart: testChart("1.0.0"), Values: tc.values, RunID: thisRun}).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tc.outcome {
				t.Errorf("outcome %s, want %s", res.Outcome, tc.outcome)
			}
			if tc.recovered == "" && res.Recovered != "" || !strings.Contains(res.Recovered, tc.recovered) {
				t.Errorf("recovered %q, want %q", res.Recovered, tc.recovered)
			}
			h, err := c.History("demo")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for i, r := range h {
				if r.Revision != i+1 {
					t.Fatalf("revisions %v: revision %d is gone (uninstalled?)", h, i+1)
				}
				got = append(got, r.Status)
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("history %v, want %s", got, tc.want)
			}
		})
	}
}

// A pending revision is recovered only when gpuctl can tell that the operation that wrote it is over:
// the gpuctl run named on it no longer holds the install Lease. Anything else pending (this run's
// own write, plain helm, another tool) is refused with Helm's words and the command that recovers it,
// however long ago it was written and whatever the clocks say.
func TestApplyRecoversOnlyWhatADeadRunLeft(t *testing.T) {
	const (
		dep = rcommon.StatusDeployed
		pi  = rcommon.StatusPendingInstall
		pu  = rcommon.StatusPendingUpgrade
		pr  = rcommon.StatusPendingRollback
	)
	helm := func(r *releasev1.Release) { // plain `helm upgrade`/`helm rollback`: the labels of revision 1, kept as they were
		r.Labels = gpuctlLabels(deadRun, 1)
	}
	for _, tc := range []struct {
		name    string
		history []rcommon.Status
		// pending changes the newest (pending) revision as its writer left it.
		pending func(r *releasev1.Release)
		runID   string
		// recovered is a substring of Result.Recovered; "" = refused with a *BusyError whose hint is hint.
		recovered string
		hint      string
	}{
		{
			name:    "an upgrade a killed gpuctl run left pending is rolled back by the next run",
			history: []rcommon.Status{dep, pu}, runID: thisRun,
			recovered: "rolled back to revision 1",
		},
		{
			name:    "a rollback a killed gpuctl run left pending is rolled back by the next run",
			history: []rcommon.Status{dep, dep, pr}, runID: thisRun,
			pending: func(r *releasev1.Release) {
				helm(r) // a rollback keeps its target's labels; gpuctl's names the run in its description
				r.Info.RollbackRevision, r.Info.Description = 1, rollbackDescription(1, deadRun)
			},
			recovered: "rolled back to revision 2",
		},
		{
			name:    "a first install a killed gpuctl run left pending is removed and installed again",
			history: []rcommon.Status{pi}, runID: thisRun,
			recovered: "removed it and installed again",
		},
		{
			name:    "an upgrade this run's own Lease covers is in progress, not a leftover",
			history: []rcommon.Status{dep, pu}, runID: deadRun,
			hint: "helm rollback demo 1 -n gpu-operator",
		},
		{
			name:    "an upgrade plain helm is running, started before this run, is refused",
			history: []rcommon.Status{dep, pu}, runID: thisRun,
			pending: func(r *releasev1.Release) { r.Labels = nil },
			hint:    "helm rollback demo 1 -n gpu-operator",
		},
		{
			name:    "an upgrade helm is running on a gpuctl release, labels inherited from gpuctl's revision, is refused",
			history: []rcommon.Status{dep, pu}, runID: thisRun, pending: helm,
			hint: "helm rollback demo 1 -n gpu-operator",
		},
		{
			name:    "a rollback helm is running on a gpuctl release is refused",
			history: []rcommon.Status{dep, dep, pr}, runID: thisRun,
			pending: func(r *releasev1.Release) {
				helm(r)
				r.Info.RollbackRevision, r.Info.Description = 1, "Rollback to 1"
			},
			hint: "helm rollback demo 2 -n gpu-operator",
		},
		{
			name:    "a first install plain helm is running is refused, and the hint uninstalls it",
			history: []rcommon.Status{pi}, runID: thisRun,
			pending: func(r *releasev1.Release) { r.Labels = nil },
			hint:    "helm uninstall demo -n gpu-operator",
		},
		{
			name:    "without the install Lease nothing pending is touched",
			history: []rcommon.Status{dep, pu}, runID: "",
			hint: "helm rollback demo 1 -n gpu-operator",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(t)
			seed(t, c, tc.history...)
			if tc.pending != nil {
				last, err := c.last("demo")
				if err != nil {
					t.Fatal(err)
				}
				tc.pending(last)
				if err := c.cfg.Releases.Update(last); err != nil {
					t.Fatal(err)
				}
			}
			before := revisions(t, c)
			res, err := (&Apply{Client: c, Name: "demo", Chart: testChart("1.0.0"), Values: map[string]any{"x": "b"}, RunID: tc.runID}).Run(context.Background())
			if tc.recovered != "" {
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(res.Recovered, tc.recovered) {
					t.Errorf("recovered %q, want %q", res.Recovered, tc.recovered)
				}
				if got := revisions(t, c); got[len(got)-1] != "deployed" {
					t.Errorf("history %v", got)
				}
				return
			}
			var busy *BusyError
			if !errors.As(err, &busy) {
				t.Fatalf("err = %v (result %+v), want a *BusyError", err, res)
			}
			want := fmt.Sprintf("release demo revision %d is %s: another operation (install/upgrade/rollback) is in progress", len(tc.history), tc.history[len(tc.history)-1])
			if !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line starting %q", err, want)
			}
			if !strings.Contains(busy.Hint(), tc.hint) {
				t.Errorf("hint %q, want it to name %q", busy.Hint(), tc.hint)
			}
			if got := revisions(t, c); !slices.Equal(got, before) {
				t.Errorf("history %v, was %v", got, before)
			}
		})
	}
}

// Every revision gpuctl writes names the run that wrote it and its own number, so a later run can
// tell it from a revision another tool wrote over it (which keeps those labels).
func TestApplyLabelsEveryRevisionWithItsRun(t *testing.T) {
	c := newTestClient(t)
	c.cfg.Releases = storage.Init(driver.NewSecrets(fakeSecrets(t)))
	for i, vals := range []map[string]any{{"x": "a"}, {"x": "b"}} {
		if _, err := (&Apply{Client: c, Name: "demo", Chart: testChart("1.0.0"), Values: vals, RunID: thisRun}).Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		last, err := c.last("demo")
		if err != nil {
			t.Fatal(err)
		}
		want := gpuctlLabels(thisRun, i+1)
		for k, v := range want {
			if last.Labels[k] != v {
				t.Errorf("revision %d: label %s=%q, want %q (labels %v)", i+1, k, last.Labels[k], v, last.Labels)
			}
		}
	}
}

// The rollback with which a run recovers a dead run's revision names the run in its description,
// the one field of a rollback's revision Helm lets it choose (the labels are its target's).
func TestApplyNamesItsRunOnItsRollback(t *testing.T) {
	c := newTestClient(t)
	seed(t, c, rcommon.StatusDeployed, rcommon.StatusPendingUpgrade)
	if _, err := (&Apply{Client: c, Name: "demo", Chart: testChart("1.0.0"), Values: map[string]any{"x": "a"}, RunID: thisRun}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	rb, err := c.cfg.Releases.Get("demo", 3)
	if err != nil {
		t.Fatal(err)
	}
	rel := rb.(*releasev1.Release)
	if rel.Info.Description != rollbackDescription(1, thisRun) {
		t.Fatalf("rollback revision 3: %q, want %q", rel.Info.Description, rollbackDescription(1, thisRun))
	}
	rel.Info.Status = rcommon.StatusPendingRollback // as it was while Helm rolled back
	if got := writtenBy(rel); got != runLabel(thisRun) {
		t.Errorf("a pending rollback of this run is written by %q, want %q", got, runLabel(thisRun))
	}
}

// Helm v3 applies client-side and stores no apply method; gpuctl's upgrade and its recovery rollback
// of such a release apply server-side all the same (forcing conflicts needs it), moving the objects'
// fields over as Helm v4 does.
func TestApplyUpgradesHelm3RevisionsServerSide(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history []rcommon.Status
	}{
		{"an upgrade of a revision helm 3 deployed", []rcommon.Status{rcommon.StatusDeployed}},
		{"the rollback that recovers a dead run's revision to one helm 3 deployed", []rcommon.Status{rcommon.StatusDeployed, rcommon.StatusPendingUpgrade}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(t)
			seed(t, c, tc.history...) // seeded revisions have no apply method, as Helm v3 writes them
			if _, err := (&Apply{Client: c, Name: "demo", Chart: testChart("1.0.0"), Values: map[string]any{"x": "b"}, RunID: thisRun}).Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			hist, err := c.history("demo")
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range hist[len(tc.history):] {
				if r.ApplyMethod != "ssa" {
					t.Errorf("revision %d (%s) applied %q, want server-side (ssa)", r.Version, r.Info.Description, r.ApplyMethod)
				}
			}
		})
	}
}

func TestRunLabelIsALabelValue(t *testing.T) {
	for _, id := range []string{
		thisRun,
		"",
		"a-very-long-host-name-of-a-build-machine.in.a.deeply.nested.example.com/1234567/deadbeef",
		"hôte/1/cafe",
		"-host-/2/beef",
	} {
		got := runLabel(id)
		if errs := validation.IsValidLabelValue(got); len(errs) != 0 {
			t.Errorf("runLabel(%q) = %q: %v", id, got, errs)
		}
		if id != "" && (got == "" || !strings.HasSuffix(id, got[len(got)-4:])) {
			t.Errorf("runLabel(%q) = %q, want it to keep the identity's random end", id, got)
		}
	}
}

// brokenDriver is Helm's in-memory driver whose queries fail, as an API server that refuses to list
// Secrets does.
type brokenDriver struct{ *driver.Memory }

var errStorage = errors.New("secrets is forbidden")

func (brokenDriver) Query(map[string]string) ([]hrelease.Releaser, error) { return nil, errStorage }
func (brokenDriver) List(func(hrelease.Releaser) bool) ([]hrelease.Releaser, error) {
	return nil, errStorage
}

func TestApplyReportsStorageErrors(t *testing.T) {
	t.Run("a release storage that cannot be read is an error, not an absent release", func(t *testing.T) {
		c := newTestClient(t)
		mem := driver.NewMemory()
		c.cfg.Releases = storage.Init(brokenDriverFor(mem))
		_, err := (&Apply{Client: c, Name: "demo", Chart: testChart("1.0.0"), RunID: thisRun}).Run(context.Background())
		if !errors.Is(err, errStorage) {
			t.Fatalf("err = %v, want the storage error", err)
		}
		if rs, _ := mem.List(func(hrelease.Releaser) bool { return true }); len(rs) != 0 {
			t.Errorf("%d revisions written despite the error", len(rs))
		}
	})
}

func brokenDriverFor(m *driver.Memory) driver.Driver { return brokenDriver{m} }

func TestApplyComparesTheChartItself(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(ch *chart.Chart)
		want   Outcome
	}{
		{"a fixed template with the same chart version upgrades", func(ch *chart.Chart) {
			ch.Templates[0].Data = append(ch.Templates[0].Data, []byte("  fixed: \"yes\"\n")...)
		}, Upgraded},
		{"new chart defaults with the same version upgrade", func(ch *chart.Chart) { ch.Values["y"] = 2 }, Upgraded},
		{"a new schema upgrades", func(ch *chart.Chart) { ch.Schema = []byte(`{"type":"object"}`) }, Upgraded},
		{"another CRD in crds/ alone does not (gpuctl applies CRDs itself)", func(ch *chart.Chart) {
			ch.Files = append(ch.Files, crdFile("crds/extra.yaml"))
		}, Unchanged},
		{"a chart loaded again, with new modification times, does not", func(ch *chart.Chart) {
			for _, f := range ch.Templates {
				f.ModTime = time.Now()
			}
		}, Unchanged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(t)
			apply(t, c, testChart("1.0.0"), map[string]any{"x": "a"})
			ch := testChart("1.0.0")
			tc.change(ch)
			if got := apply(t, c, ch, map[string]any{"x": "a"}).Outcome; got != tc.want {
				t.Errorf("outcome %s, want %s", got, tc.want)
			}
		})
	}
}

func TestChartDigestSurvivesHelmSecretStorage(t *testing.T) {
	c := newTestClient(t)
	c.cfg.Releases = storage.Init(driver.NewSecrets(fakeSecrets(t)))
	ch := testChart("1.0.0")
	ch.Values = map[string]any{"x": "default", "n": 1, "nested": map[string]any{"list": []any{1, "two", true}}}
	ch.Schema = []byte(`{"type":"object"}`)
	ch.Files = append(ch.Files, crdFile("crds/a.yaml"), crdFile("README.md"))
	first := apply(t, c, ch, map[string]any{"x": "a"})
	again := apply(t, c, ch, map[string]any{"x": "a"})
	if first.Outcome != Installed || again.Outcome != Unchanged {
		t.Fatalf("outcomes %s then %s, want installed then unchanged: the stored chart's digest differs from the chart's", first.Outcome, again.Outcome)
	}
	stored, err := c.last("demo")
	if err != nil {
		t.Fatal(err)
	}
	if ChartDigest(stored.Chart) != ChartDigest(ch) {
		t.Errorf("digest %s after Helm's storage, %s before", ChartDigest(stored.Chart), ChartDigest(ch))
	}
}

func crdFile(name string) *common.File {
	return &common.File{Name: name, Data: []byte("kind: CustomResourceDefinition\n")}
}

// fakeSecrets is a Secrets client of client-go's fake clientset: Helm's Secret driver over it encodes
// and decodes every revision as it does against a cluster.
func fakeSecrets(t *testing.T) corev1client.SecretInterface {
	t.Helper()
	return kubefake.NewClientset().CoreV1().Secrets("gpu-operator")
}
