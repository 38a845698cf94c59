package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/release"
)

// A Helm operation gpuctl did not start, in progress on one of its releases, is another writer at
// work: the lock's exit code, one line naming the pending revision and one with the command that
// recovers it once that operation is over.
func TestReportBusyRelease(t *testing.T) {
	busy := &release.BusyError{Release: "gpu-operator", Namespace: "gpu-operator", Revision: 4, Status: "pending-upgrade",
		Recover: "helm rollback gpu-operator 3 -n gpu-operator"}
	var b bytes.Buffer
	code := report(&b, fmt.Errorf("install the GPU Operator: %w", busy))
	if code != ExitLocked {
		t.Errorf("exit %d, want %d", code, ExitLocked)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "revision 4 is pending-upgrade: another operation (install/upgrade/rollback) is in progress") ||
		!strings.Contains(lines[1], "helm rollback gpu-operator 3 -n gpu-operator") {
		t.Errorf("output:\n%s", b.String())
	}
}
