package e2e

import (
	"maps"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/record"
)

// TestUpgradePath: NVIDIA supports an upgrade within a major release or to the next one only
// (platform-support.html), so gpuctl moves a stack of v25.10.1 to v26.7.0 through v26.3.3. The dry run
// lists both hops, each with its diff and value changes, and writes nothing; --yes without
// --accept-value-changes is refused naming the path; the run, interrupted between the hops, leaves
// v26.3.3 healthy and says how to go on; run again, it goes on from there, and the gpu-operator
// release ends at three Helm revisions, one per release, with NVIDIA's real v26.7.0 controller
// reconciling the ClusterPolicy. (TestDay2Upgrade runs the path without an interrupt.)
func TestUpgradePath(t *testing.T) {
	t.Parallel()
	s := cleanSandbox(t, day2Scenario)
	c := s.Cluster
	ctx := t.Context()
	runsBefore := len(c.OperatorRuns())
	installJSON(t, c, "--operator-version", "v25.10.1")
	target := []string{"--operator-version", "v26.7.0"}

	t.Run("the dry run lists both hops, each with its changes, and writes nothing, not even the lock", func(t *testing.T) {
		before, leaseBefore := clusterState(t, c), leaseVersion(t, c)
		dry := upgradeJSON(t, c, append(target, "--dry-run")...)
		if want := []string{"v25.10.1", "v26.3.3", "v26.7.0"}; !slices.Equal(dry.Path, want) {
			t.Errorf("path %v, want %v", dry.Path, want)
		}
		if len(dry.Hops) != 2 {
			t.Fatalf("%d hops, want 2: %+v", len(dry.Hops), dry.Hops)
		}
		for i, want := range [][2]string{{"v25.10.1", "v26.3.3"}, {"v26.3.3", "v26.7.0"}} {
			h := dry.Hops[i]
			if h.From != want[0] || h.To != want[1] || h.Preview == nil || !h.Preview.Changed() || len(h.Preview.Diffs) == 0 || h.Install == nil || h.Install.Plan == nil {
				t.Errorf("hop %d: %s → %s, preview %+v; want %s → %s with a diff", i+1, h.From, h.To, h.Preview, want[0], want[1])
				continue
			}
			for _, r := range h.Preview.Releases {
				if r.Name == "gpu-operator" && (!strings.Contains(r.FromChart, strings.TrimPrefix(want[0], "v")) || !strings.Contains(r.ToChart, strings.TrimPrefix(want[1], "v"))) {
					t.Errorf("hop %d moves gpu-operator %s → %s", i+1, r.FromChart, r.ToChart)
				}
			}
		}
		// v26.3 turned ccManager on by default: the first hop's change, not the second's.
		if v := dry.Hops[0].Preview.Values; v == nil || !slices.ContainsFunc(v.ChangedDefaults, func(d bundle.ChangedDefault) bool { return d.Key == "ccManager.enabled" }) {
			t.Errorf("the first hop's value changes %+v lack ccManager.enabled", v)
		}
		code, stdout, _ := gpuctl(t, c, append([]string{"upgrade", "--dry-run"}, target...)...)
		for _, want := range []string{"GPU Operator v25.10.1 → v26.7.0 through v26.3.3", "Upgrade 1/2", "GPU Operator v25.10.1 → v26.3.3 (upgrade)", "Upgrade 2/2", "GPU Operator v26.3.3 → v26.7.0 (upgrade)"} {
			if code != 0 || !strings.Contains(stdout, want) {
				t.Errorf("exit %d, text dry run lacks %q:\n%s", code, want, stdout)
			}
		}
		if after := clusterState(t, c); !maps.Equal(before, after) {
			t.Errorf("upgrade --dry-run changed the cluster:\nbefore %v\nafter  %v", before, after)
		}
		if got := leaseVersion(t, c); got != leaseBefore {
			t.Errorf("upgrade --dry-run wrote the lock's Lease (resourceVersion %q → %q)", leaseBefore, got)
		}
	})

	t.Run("--yes without --accept-value-changes is refused naming the path, before anything is written", func(t *testing.T) {
		before := clusterState(t, c)
		code, _, stderr := gpuctl(t, c, append([]string{"upgrade", "--yes"}, target...)...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if last := lines[len(lines)-1]; code != cli.ExitUsage || !strings.Contains(last, "v25.10.1 → v26.3.3 → v26.7.0") || !strings.Contains(last, "--accept-value-changes") {
			t.Errorf("exit %d, last line %q", code, last)
		}
		assertUnchanged(t, before, clusterState(t, c))
	})

	t.Run("interrupted between the hops, the stack runs v26.3.3, healthy, and gpuctl says how to go on", func(t *testing.T) {
		bin, err := gpuctlBinary()
		if err != nil {
			t.Fatal(err)
		}
		args := append([]string{"--kubeconfig", c.Kubeconfig, "upgrade", "--yes", "--accept-value-changes"}, target...)
		code, stderr := runUntil(t, bin, args, func(ev event.Event) bool {
			return ev.Type == event.Info && strings.HasPrefix(ev.Message, "upgrade 2/2:")
		}, nil)
		if code != cli.ExitInterrupted {
			t.Errorf("exit %d, want %d", code, cli.ExitInterrupted)
		}
		for _, want := range []string{"interrupted after step 1/2", "finished:", "upgrade-v26.3.3", "not started:", "upgrade-v26.7.0",
			"To go on, run gpuctl upgrade --operator-version v26.7.0 again: the stack runs v26.3.3"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q", want)
			}
		}
		h := releaseHistory(t, c, "gpu-operator")
		if len(h) != 2 || h[1].ChartVersion != "26.3.3" || h[1].Status != "deployed" {
			t.Errorf("gpu-operator history %s, last %+v: want revision 2 of v26.3.3 deployed", history(t, c, "gpu-operator"), h[len(h)-1])
		}
		rec, err := record.Read(ctx, c.Kube)
		if err != nil || rec == nil || rec.OperatorVersion != "v26.3.3" || rec.Result != "succeeded" {
			t.Errorf("install record after the interrupt: %+v, %v", rec, err)
		}
		if code, st := statusJSON(t, c, healthyWait()...); code != 0 {
			t.Errorf("status at v26.3.3: exit %d, %+v", code, st.Checks)
		}
	})

	t.Run("run again, it goes on from v26.3.3: three revisions, one per release, and v26.7.0's controller reconciles", func(t *testing.T) {
		res := upgradeJSON(t, c, append([]string{"--yes", "--accept-value-changes"}, target...)...)
		if !slices.Equal(res.Path, []string{"v26.3.3", "v26.7.0"}) || len(res.Hops) != 0 {
			t.Errorf("the rerun's path %v (%d hops), want v26.3.3 → v26.7.0 in one", res.Path, len(res.Hops))
		}
		var charts, states []string
		for _, r := range releaseHistory(t, c, "gpu-operator") {
			charts, states = append(charts, r.ChartVersion), append(states, r.Status)
		}
		if !slices.Equal(charts, []string{"25.10.1", "26.3.3", "26.7.0"}) || !slices.Equal(states, []string{"superseded", "superseded", "deployed"}) {
			t.Errorf("gpu-operator revisions: charts %v, states %v", charts, states)
		}
		crd, err := apiextensionsclient.NewForConfigOrDie(c.Config).ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "clusterpolicies.nvidia.com", metav1.GetOptions{})
		if err != nil || crd.Annotations[kube.CRDVersionAnnotation] != "v26.7.0" {
			t.Errorf("ClusterPolicy CRD after the upgrade: %v, annotations %v", err, crd.Annotations)
		}
		assertReconciled(t, c, "cluster-policy")
		// NVIDIA's controller of each release ran in turn, built from its sources, and none exited on
		// its own; v26.7.0's runs.
		var releases []string
		for _, r := range c.OperatorRuns()[runsBefore:] {
			if len(releases) == 0 || releases[len(releases)-1] != r.Release {
				releases = append(releases, r.Release)
			}
			if r.ExitErr != "" || !r.FromSources {
				t.Errorf("controller run %+v", r)
			}
		}
		runs := c.OperatorRuns()
		if !slices.Equal(releases, []string{"v25.10.1", "v26.3.3", "v26.7.0"}) || !runs[len(runs)-1].Exited.IsZero() {
			t.Errorf("controller runs %v: want v25.10.1's, v26.3.3's, then v26.7.0's still running", releases)
		}
		if code, st := statusJSON(t, c, healthyWait()...); code != 0 || st.Record.OperatorVersion != "v26.7.0" {
			t.Errorf("status after the upgrade: exit %d, record %+v", code, st.Record)
		}
	})
}
