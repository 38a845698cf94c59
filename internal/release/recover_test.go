package release

import (
	"context"
	"errors"
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
	kubefake "k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// seed stores revisions 1..n of the demo release in the given states, each written a minute apart
// and the last one a minute before now; values x=a throughout.
func seed(t *testing.T, c *Client, states ...rcommon.Status) {
	t.Helper()
	start := time.Now().Add(-time.Duration(len(states)) * time.Minute)
	for i, st := range states {
		rel := &releasev1.Release{Name: "demo", Namespace: "gpu-operator", Version: i + 1, Chart: testChart("1.0.0"),
			Config:   map[string]any{"x": "a"},
			Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\ndata:\n  x: \"a\"\n",
			Info: &releasev1.Info{Status: st, FirstDeployed: start, LastDeployed: start.Add(time.Duration(i) * time.Minute),
				Description: "seeded"}}
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
			res, err := (&Apply{Client: c, Name: "demo", Chart: testChart("1.0.0"), Values: tc.values, LockedSince: time.Now()}).Run(context.Background())
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

func TestApplyLeavesOthersPendingRevisionsAlone(t *testing.T) {
	for _, tc := range []struct {
		name        string
		lockedSince time.Time
		want        string
	}{
		{"a revision written after the lock was taken belongs to another writer", time.Now().Add(-90 * time.Second), "after this run took gpuctl's install lock"},
		{"without the lock no pending revision is recovered", time.Time{}, "only while holding its install lock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(t)
			seed(t, c, rcommon.StatusDeployed, rcommon.StatusPendingUpgrade) // revision 2 written a minute ago
			_, err := (&Apply{Client: c, Name: "demo", Chart: testChart("1.0.0"), Values: map[string]any{"x": "b"}, LockedSince: tc.lockedSince}).Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if got := revisions(t, c); strings.Join(got, ",") != "deployed,pending-upgrade" {
				t.Errorf("history %v changed", got)
			}
		})
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
		_, err := (&Apply{Client: c, Name: "demo", Chart: testChart("1.0.0"), LockedSince: time.Now()}).Run(context.Background())
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
