package engine

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// TestUpgradePath: NVIDIA supports an upgrade within a major release or to the next one, so a move
// two majors ahead goes through the newest catalog release of the major between; a downgrade and a
// major the catalog does not know have no path (--force moves straight there).
func TestUpgradePath(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to string
		force    bool
		want     []string
		refused  []string // what the refusal names
	}{
		{name: "v25.10.1 to v26.7.0 goes through v26.3.3: two hops", from: "v25.10.1", to: "v26.7.0", want: []string{"v26.3.3", "v26.7.0"}},
		{name: "v26.3.3 to v26.7.0 is the next major: one hop", from: "v26.3.3", to: "v26.7.0", want: []string{"v26.7.0"}},
		{name: "v25.10.1 to v26.3.3 is the next major: one hop", from: "v25.10.1", to: "v26.3.3", want: []string{"v26.3.3"}},
		{name: "the same release has no hop", from: "v26.7.0", to: "v26.7.0"},
		{name: "a patch the catalog no longer has, of a major it knows, goes through the same path", from: "v25.10.0", to: "v26.7.0", want: []string{"v26.3.3", "v26.7.0"}},
		{name: "within a major is one hop", from: "v26.3.1", to: "v26.3.3", want: []string{"v26.3.3"}},
		{name: "an install an older gpuctl recorded without a version is one hop", from: "", to: "v26.7.0", want: []string{"v26.7.0"}},
		{name: "a downgrade is refused, naming the move and --force", from: "v26.7.0", to: "v25.10.1", refused: []string{"v26.7.0 → v25.10.1", "downgrade", "--force"}},
		{name: "a downgrade within a major is refused too", from: "v26.7.0", to: "v26.7.0-rc.1", refused: []string{"downgrade"}},
		{name: "--force downgrades in one move", from: "v26.7.0", to: "v25.10.1", force: true, want: []string{"v25.10.1"}},
		{name: "an installed major the catalog does not know is refused, naming the majors it knows", from: "v24.9.2", to: "v26.7.0", refused: []string{"24.9", "25.10, 26.3, 26.7", "--force"}},
		{name: "--force moves from an unknown major in one move", from: "v24.9.2", to: "v26.7.0", force: true, want: []string{"v26.7.0"}},
		{name: "a target major the catalog does not know is refused", from: "v25.10.1", to: "v27.1.0", refused: []string{"27.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := UpgradePath(tc.from, tc.to, tc.force)
			if tc.refused != nil {
				var pe *PathError
				if !errors.As(err, &pe) || !errors.Is(err, plan.ErrInput) {
					t.Fatalf("UpgradePath = %v, %v; want a PathError (an input mistake)", got, err)
				}
				for _, w := range tc.refused {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%q does not name %q", err, w)
					}
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("not one line: %q", err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("UpgradePath(%q, %q) = %v, %v; want %v", tc.from, tc.to, got, err, tc.want)
			}
		})
	}
}

// TestUpgradeHopsAfterAnInterruptedUpgrade: an upgrade interrupted halfway through a hop that crossed a
// major finishes that hop (a same-release pass that waits until the stack is healthy) before the next
// major; a finished one goes on at once; OpenShift's stack is one hop whatever the distance (OLM's
// channel graph decides the path).
func TestUpgradeHopsAfterAnInterruptedUpgrade(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  record.Record
		want []string
	}{
		{"a finished hop goes on from the release it left", record.Record{Command: "upgrade", Result: "succeeded", OperatorVersion: "v26.3.3"}, []string{"v26.3.3 → v26.7.0 (upgrade)"}},
		{"an interrupted hop is finished first", record.Record{Command: "upgrade", Result: "interrupted", OperatorVersion: "v26.3.3"},
			[]string{"v26.3.3 → v26.3.3 (same)", "v26.3.3 → v26.7.0 (upgrade)"}},
		{"a failed install is not redone", record.Record{Command: "install", Result: "failed", OperatorVersion: "v25.10.1"},
			[]string{"v25.10.1 → v26.3.3 (upgrade)", "v26.3.3 → v26.7.0 (upgrade)"}},
		{"OpenShift moves in one hop", record.Record{Command: "install", Result: "succeeded", Distribution: "openshift", OperatorVersion: "v25.10.1"},
			[]string{"v25.10.1 → v26.7.0 (upgrade)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hops, err := upgradeHops(&tc.rec, mustBundle(t, "v26.7.0"), false)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range hops {
				got = append(got, h.from+" → "+h.to.Version+" ("+string(h.change)+")")
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("hops %v, want %v", got, tc.want)
			}
		})
	}
}

// TestUpgradeTwoMajorsAheadListsEveryHopsValueChanges: the value changes of each hop are judged before
// anything is written, and --yes without --accept-value-changes is refused naming every hop.
func TestUpgradeTwoMajorsAheadListsEveryHopsValueChanges(t *testing.T) {
	cs := fake.NewClientset()
	useOpen := plan.Layer{Source: "values.yaml", Values: map[string]any{"driver": map[string]any{"useOpenKernelModules": true}}}
	rec := &record.Record{Command: "install", Result: "succeeded", Distribution: "kubeadm", Profile: "kubeadm", Namespace: "gpu-operator",
		OperatorVersion: "v25.10.1", Inputs: record.Inputs{Files: []plan.Layer{useOpen}}}
	if err := record.Write(t.Context(), cs, rec); err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()
	var warnings []string
	u := &Upgrade{Clients: &kube.Clients{Kube: cs, Discovery: cs.Discovery(), Namespace: "gpu-operator"},
		Options: UpgradeOptions{OperatorVersion: "v26.7.0"},
		Sink: event.SinkFunc(func(e event.Event) {
			if e.Type == event.Warning {
				warnings = append(warnings, e.Message)
			}
		})}
	_, err := u.Run(t.Context())
	var vc *ValueChangesError
	if !errors.As(err, &vc) {
		t.Fatalf("Run = %v, want a ValueChangesError", err)
	}
	var hops []string
	for _, h := range vc.Hops {
		hops = append(hops, h.From+" → "+h.To)
	}
	if !slices.Equal(hops, []string{"v25.10.1 → v26.3.3", "v26.3.3 → v26.7.0"}) {
		t.Errorf("hops with changes %v", hops)
	}
	for _, w := range []string{"v25.10.1 → v26.3.3 → v26.7.0", "v26.3.3:", "v26.7.0:", "--accept-value-changes", "Nothing was changed"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q not in %q", w, err)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("not one line: %q", err)
	}
	for _, want := range []string{"values v25.10.1 → v26.3.3: ccManager.enabled", "values v26.3.3 → v26.7.0: driver.useOpenKernelModules"} {
		if !slices.ContainsFunc(warnings, func(w string) bool { return strings.HasPrefix(w, want) }) {
			t.Errorf("no warning starts with %q: %v", want, warnings)
		}
	}
	for _, a := range cs.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("wrote before refusing: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

// TestUpgradeRefusesADowngradeNamingThePath: a downgrade across majors has no path: refused before
// anything is written.
func TestUpgradeRefusesADowngradeNamingThePath(t *testing.T) {
	cs := fake.NewClientset()
	rec := &record.Record{Command: "upgrade", Result: "succeeded", Distribution: "kubeadm", Profile: "kubeadm", Namespace: "gpu-operator", OperatorVersion: "v26.7.0"}
	if err := record.Write(t.Context(), cs, rec); err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()
	u := &Upgrade{Clients: &kube.Clients{Kube: cs, Discovery: cs.Discovery(), Namespace: "gpu-operator"}, Options: UpgradeOptions{OperatorVersion: "v25.10.1"}}
	_, err := u.Run(t.Context())
	var pe *PathError
	if !errors.As(err, &pe) || !errors.Is(err, plan.ErrInput) || !strings.Contains(err.Error(), "v26.7.0 → v25.10.1") {
		t.Fatalf("Run = %v, want a PathError naming v26.7.0 → v25.10.1", err)
	}
	for _, a := range cs.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("wrote before refusing: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

// TestChainedPreviewStartsFromTheHopBefore: a hop after the first is previewed against what the hop
// before it renders, not against the deployed revision: its move starts from the hop before's chart
// and revision, and a release the hop does not change is unchanged.
func TestChainedPreviewStartsFromTheHopBefore(t *testing.T) {
	values := map[string]any{"driver": map[string]any{"enabled": true}}
	before := &releaseState{chart: "gpu-operator-v26.3.3", app: "v26.3.3", revision: 2, digest: "a", values: values, manifest: "kind: ClusterPolicy\nspec: {a: 1}\n"}
	for _, tc := range []struct {
		name    string
		after   releaseState
		outcome release.Outcome
		rev     int
	}{
		{"a new chart is an upgrade from the hop before's revision", releaseState{chart: "gpu-operator-v26.7.0", app: "v26.7.0", digest: "b", values: values, manifest: "kind: ClusterPolicy\nspec: {a: 2}\n"}, release.WouldUpgrade, 3},
		{"the same chart and values change nothing", releaseState{chart: "gpu-operator-v26.3.3", app: "v26.3.3", digest: "a", values: map[string]any{"driver": map[string]any{"enabled": true}}, manifest: before.manifest}, release.Unchanged, 2},
		{"new values are an upgrade", releaseState{chart: "gpu-operator-v26.3.3", app: "v26.3.3", digest: "a", values: map[string]any{"driver": map[string]any{"enabled": false}}, manifest: before.manifest}, release.WouldUpgrade, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			move := ReleaseChange{Name: "gpu-operator", ToChart: tc.after.chart, ToApp: tc.after.app, FromChart: "gpu-operator-v25.10.1", FromRevison: 1, Outcome: release.WouldUpgrade, Recreate: []string{"ClusterPolicy cluster-policy"}}
			got, state := chainMove(move, before, tc.after)
			if got.Outcome != tc.outcome || got.FromChart != before.chart || got.FromApp != before.app || got.FromRevison != before.revision || got.Recreate != nil {
				t.Errorf("move %+v: want %s from %s revision %d, nothing recreated", got, tc.outcome, before.chart, before.revision)
			}
			if state.revision != tc.rev {
				t.Errorf("the hop leaves revision %d, want %d", state.revision, tc.rev)
			}
		})
	}
}

// TestChainInterruptedBetweenHops: an interrupt after a hop finished and before the next one's first
// write says which hops finished and how to go on, naming the target release.
func TestChainInterruptedBetweenHops(t *testing.T) {
	hops := []upgradeHop{{from: "v25.10.1", to: mustBundle(t, "v26.3.3"), change: plan.VersionUpgrade}, {from: "v26.3.3", to: mustBundle(t, "v26.7.0"), change: plan.VersionUpgrade}}
	err := hopError(&runner.InterruptedError{BeforeFirstWrite: true}, hops, 1)
	var ie *runner.InterruptedError
	if !errors.As(err, &ie) || ie.BeforeFirstWrite || ie.Count != 2 || len(ie.Finished) != 1 || !slices.Equal(ie.NotStarted, []string{"upgrade-v26.7.0"}) {
		t.Fatalf("hopError = %+v", err)
	}
	for _, w := range []string{"gpuctl upgrade --operator-version v26.7.0", "v26.3.3"} {
		if !strings.Contains(ie.Resume, w) {
			t.Errorf("resume %q lacks %q", ie.Resume, w)
		}
	}
	// In the first hop's, before its first write, nothing was changed: it stays as it is.
	first := &runner.InterruptedError{BeforeFirstWrite: true}
	if err := hopError(first, hops, 0); !errors.As(err, &ie) || !ie.BeforeFirstWrite {
		t.Errorf("the first hop's interrupt before its first write: %v", err)
	}
	// In a hop's writes: the hop's own account, with the chain's way on.
	during := &runner.InterruptedError{Count: 9, InFlight: &runner.StepResult{ID: "release-gpu-operator"}}
	if err := hopError(during, hops, 1); !errors.As(err, &ie) || ie.InFlight == nil || !strings.Contains(ie.Resume, "--operator-version v26.7.0") {
		t.Errorf("an interrupt during the second hop: %+v", err)
	}
}

func mustBundle(t *testing.T, version string) bundle.Bundle {
	t.Helper()
	b, err := bundle.Get(version)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
