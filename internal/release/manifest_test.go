package release

import (
	"context"
	"testing"

	rcommon "helm.sh/helm/v4/pkg/release/common"
)

// TestPreviewApplyDecidesAsApply: the preview of a release (what `gpuctl install --dry-run` lists) is
// the operation and revision Apply then carries out, whatever the release's history.
func TestPreviewApplyDecidesAsApply(t *testing.T) {
	tests := []struct {
		name         string
		history      []rcommon.Status
		values       map[string]any
		want         Outcome
		wantRevision int
		wantFrom     int
		applied      Outcome
	}{
		{"no release: install revision 1", nil, map[string]any{"x": "a"}, WouldInstall, 1, 0, Installed},
		{"deployed with the same chart and values: unchanged", []rcommon.Status{rcommon.StatusDeployed}, map[string]any{"x": "a"}, Unchanged, 0, 1, Unchanged},
		{"deployed with other values: upgrade to the next revision", []rcommon.Status{rcommon.StatusDeployed}, map[string]any{"x": "b"}, WouldUpgrade, 2, 1, Upgraded},
		{"a failed newest revision over a deployed one: upgrade from the newest", []rcommon.Status{rcommon.StatusDeployed, rcommon.StatusFailed}, map[string]any{"x": "a"}, WouldUpgrade, 3, 2, Upgraded},
		{"a failed first install, never deployed: upgraded, not installed", []rcommon.Status{rcommon.StatusFailed}, map[string]any{"x": "a"}, WouldUpgrade, 2, 1, Upgraded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(t)
			seed(t, c, tc.history...)
			ch := testChart("1.0.0")
			pv, err := c.PreviewApply(context.Background(), "demo", ch, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			if pv.Outcome != tc.want || pv.Revision != tc.wantRevision || pv.From != tc.wantFrom {
				t.Errorf("preview %s revision %d from %d, want %s revision %d from %d", pv.Outcome, pv.Revision, pv.From, tc.want, tc.wantRevision, tc.wantFrom)
			}
			if (pv.Manifest == "") != (tc.want == Unchanged) {
				t.Errorf("preview %s with manifest %q", pv.Outcome, pv.Manifest)
			}
			res := apply(t, c, ch, tc.values)
			if res.Outcome != tc.applied {
				t.Errorf("Apply then %s, the preview said %s", res.Outcome, pv.Outcome)
			}
			if tc.want != Unchanged && res.Release.Revision != pv.Revision {
				t.Errorf("Apply wrote revision %d, the preview said %d", res.Release.Revision, pv.Revision)
			}
		})
	}
}
