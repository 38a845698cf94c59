package cli

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/engine"
)

func TestUpgradeExit(t *testing.T) {
	changes := &bundle.ValueChanges{From: "v25.10.1", To: "v26.7.0", NotRead: []bundle.UnreadKey{{Key: "driver.useOpenKernelModules", Replacement: "driver.kernelModuleType"}}}
	for _, tc := range []struct {
		name             string
		err              error
		refused, changes bool
		code             int
		want             string
	}{
		{"unacknowledged value changes are a usage error naming the flag", fmt.Errorf("upgrade: %w", &engine.ValueChangesError{Changes: changes}), false, false, ExitUsage, "--accept-value-changes"},
		{"a refusal without a terminal whose preview lists value changes names both flags", engine.ErrNotConfirmed, true, true, ExitUsage, "--yes, and --accept-value-changes"},
		{"a refusal without a terminal names --yes", engine.ErrNotConfirmed, true, false, ExitUsage, "needs --yes. Nothing was changed"},
		{"a move with no supported upgrade path is a usage error naming the path", pathErr(t, "v26.7.0", "v25.10.1"), false, false, ExitUsage, "no supported upgrade path v26.7.0 → v25.10.1"},
		{"a major the catalog does not know is a usage error naming the majors it knows", pathErr(t, "v24.9.2", "v26.7.0"), false, false, ExitUsage, "25.10, 26.3, 26.7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := upgradeExit(tc.err, tc.refused, tc.changes)
			if got := exitCode(err); got != tc.code || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("exit %d (want %d), %q lacks %q or is not one line", got, tc.code, err, tc.want)
			}
			var u usageError
			if !errors.As(err, &u) {
				t.Errorf("%T is not a usage error", err)
			}
		})
	}
}

// pathErr is engine.UpgradePath's refusal of the move from → to.
func pathErr(t *testing.T, from, to string) error {
	t.Helper()
	_, err := engine.UpgradePath(from, to, false)
	var pe *engine.PathError
	if !errors.As(err, &pe) {
		t.Fatalf("UpgradePath(%s, %s) = %v, want a PathError", from, to, err)
	}
	return err
}

// TestReportPathRefusal: the refusal is one line on stderr, exit 2, naming the move and --force.
func TestReportPathRefusal(t *testing.T) {
	var b strings.Builder
	code := report(&b, upgradeExit(pathErr(t, "v26.7.0", "v25.10.1"), false, false))
	if out := strings.TrimSpace(b.String()); code != ExitUsage || strings.Count(out, "\n") != 0 || !strings.Contains(out, "v26.7.0 → v25.10.1") || !strings.Contains(out, "--force") {
		t.Errorf("exit %d, %q", code, out)
	}
}
