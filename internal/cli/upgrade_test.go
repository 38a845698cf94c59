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
