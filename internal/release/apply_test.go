package release

import (
	"context"
	"slices"
	"testing"

	rcommon "helm.sh/helm/v4/pkg/release/common"
)

// TestApplyDecidesFromTheNewestRevision: what Run does with each newest revision it finds, and that a
// dry run writes nothing whatever it finds.
func TestApplyDecidesFromTheNewestRevision(t *testing.T) {
	same, other := map[string]any{"x": "a"}, map[string]any{"x": "b"}
	dep, sup, fail, pu := rcommon.StatusDeployed, rcommon.StatusSuperseded, rcommon.StatusFailed, rcommon.StatusPendingUpgrade
	for _, tc := range []struct {
		name    string
		history []rcommon.Status
		values  map[string]any
		dryRun  bool
		want    Outcome
		wantErr bool
		// after is the history's statuses once Run is done.
		after []string
	}{
		{"no release is installed", nil, same, false, Installed, false, []string{"deployed"}},
		{"a deployed revision with the same chart and values is left as it is", []rcommon.Status{sup, dep}, same, false, Unchanged, false, []string{"superseded", "deployed"}},
		{"a deployed revision with other values is upgraded", []rcommon.Status{dep}, other, false, Upgraded, false, []string{"superseded", "deployed"}},
		{"a failed revision with the same chart and values is upgraded", []rcommon.Status{dep, fail}, same, false, Upgraded, false, []string{"superseded", "failed", "deployed"}},
		{"a dry run of a first install would install and writes nothing", nil, same, true, WouldInstall, false, nil},
		{"a dry run with other values would upgrade and writes nothing", []rcommon.Status{dep}, other, true, WouldUpgrade, false, []string{"deployed"}},
		{"a dry run with the same values is unchanged", []rcommon.Status{dep}, same, true, Unchanged, false, []string{"deployed"}},
		{"a dry run supersedes no extra deployed revision", []rcommon.Status{dep, dep}, same, true, Unchanged, false, []string{"deployed", "deployed"}},
		{"a dry run recovers no pending revision (Helm refuses it)", []rcommon.Status{dep, pu}, other, true, "", true, []string{"deployed", "pending-upgrade"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(t)
			seed(t, c, tc.history...)
			res, err := (&Apply{Client: c, Name: "demo", Chart: testChart("1.0.0"), Values: tc.values, DryRun: tc.dryRun, RunID: thisRun}).Run(context.Background())
			switch {
			case tc.wantErr && err == nil:
				t.Fatalf("outcome %s, want an error", res.Outcome)
			case !tc.wantErr && err != nil:
				t.Fatal(err)
			case !tc.wantErr && res.Outcome != tc.want:
				t.Errorf("outcome %s, want %s", res.Outcome, tc.want)
			}
			if got := revisions(t, c); !slices.Equal(got, tc.after) {
				t.Errorf("history %v, want %v", got, tc.after)
			}
		})
	}
}
