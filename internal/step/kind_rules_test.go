package step

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
)

// TestRulesSayWhatOnlyTheRunDecides: a write the dry run cannot list (it depends on what the run
// finds) is stated as a rule by the kind that makes it.
func TestRulesSayWhatOnlyTheRunDecides(t *testing.T) {
	nfd := plan.Step{ID: "release-node-feature-discovery", Kind: plan.KindRelease, Release: &plan.Release{Name: plan.NFDRelease}}
	safety := func(planned bool) plan.Step {
		return plan.Step{ID: "safety", Kind: plan.KindSafety, Safety: &plan.Safety{TolerationsPlanned: planned, NFDRelease: nfd.ID, OperatorRelease: "release-gpu-operator"}}
	}
	taint := plan.Step{ID: "taint", Kind: plan.KindTaint, Taint: &plan.Taint{Key: plan.TaintKey, Value: "present", Effect: "NoSchedule"}}
	mig := plan.Step{ID: plan.MIGStepID, Kind: plan.KindMIGAfterGFD, Labels: &plan.NodeLabels{Key: plan.MIGLabel}}
	ch, err := render.LoadChart(plan.NFDRelease, "")
	if err != nil {
		t.Fatal(err)
	}
	kept := plan.Step{ID: "release-gpu-operator", Kind: plan.KindRelease, Release: &plan.Release{Name: plan.NFDRelease, Chart: plan.NFDRelease, ChartVersion: ch.Metadata.Version,
		Values: map[string]any{}, KeepSubchart: &plan.KeptSubchart{Release: plan.OperatorRelease, Namespace: "gpu-operator", Chart: "node-feature-discovery"}}}
	for _, tc := range []struct {
		name      string
		steps     []plan.Step
		wantNodes bool
		wantRules []string
	}{
		{"a taint step taints the GPU nodes NFD labels during the run too, and says so", []plan.Step{taint}, true, nil},
		{"tolerations the safety check may add re-apply the NFD release", []plan.Step{nfd, safety(false)}, false,
			[]string{"release node-feature-discovery is applied once more"}},
		{"tolerations already planned add no write", []plan.Step{safety(true)}, false, nil},
		{"an OLM InstallPlan is approved by its name found at run time",
			[]plan.Step{{ID: "approve", Kind: plan.KindApprove, Target: "nvidia-gpu-operator/gpu-operator-certified"}}, false,
			[]string{"approves the InstallPlan OLM creates for nvidia-gpu-operator/gpu-operator-certified"}},
		{"--mig decided after GPU Feature Discovery", []plan.Step{mig}, false, []string{"labels " + plan.MIGLabel + " on the nodes of step " + plan.MIGStepID}},
		{"an adopted release's NFD subchart is kept", []plan.Step{kept}, false, []string{"helm.sh/resource-policy: keep"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFakeCluster(t, nil)
			p := &plan.Plan{Namespace: "gpu-operator", Steps: tc.steps}
			l := &lister{clients: c.clients(), plan: p, releases: release.ClientsOf(map[string]*release.Client{"gpu-operator": c.helm}), w: &plan.Writes{}}
			for i := range p.Steps {
				if p.Steps[i].Kind == plan.KindRelease && p.Steps[i].Release.KeepSubchart == nil {
					continue // only the rule matters here
				}
				k, err := For(p.Steps[i].Kind)
				if err != nil {
					t.Fatal(err)
				}
				if err := k.Writes(context.Background(), l, &p.Steps[i]); err != nil {
					t.Fatal(err)
				}
			}
			if (l.w.NodeRule != "") != tc.wantNodes {
				t.Errorf("node rule %q, want one: %v", l.w.NodeRule, tc.wantNodes)
			}
			if len(l.w.Rules) != len(tc.wantRules) {
				t.Fatalf("rules %q, want %d", l.w.Rules, len(tc.wantRules))
			}
			for i, r := range l.w.Rules {
				if !strings.Contains(r, tc.wantRules[i]) {
					t.Errorf("rule %q does not say %q", r, tc.wantRules[i])
				}
			}
		})
	}
}
