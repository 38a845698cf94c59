package runner

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/plan"
)

func TestFinalizerHintNamesTheObjectAndHowToProceed(t *testing.T) {
	hint := (&FinalizerError{Object: "ClusterPolicy cluster-policy", Finalizers: []string{"example.com/hold"}}).Hint()
	for _, want := range []string{"example.com/hold", "kubectl patch clusterpolicy cluster-policy", "gpuctl uninstall again"} {
		if !contains(hint, want) {
			t.Errorf("hint %q lacks %q", hint, want)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestReleasesAreUninstalledInReverseInstallOrder(t *testing.T) {
	names := []string{plan.NFDRelease, plan.GKEDriverInstaller + "-cos", plan.OperatorRelease, plan.MonitoringRelease}
	slices.SortStableFunc(names, func(a, b string) int { return releaseOrder(a) - releaseOrder(b) })
	want := []string{plan.MonitoringRelease, plan.OperatorRelease, plan.GKEDriverInstaller + "-cos", plan.NFDRelease}
	if !slices.Equal(names, want) {
		t.Errorf("order %v, want %v (the dashboard and alerts go before the operator they watch)", names, want)
	}
}
