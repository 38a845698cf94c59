package uninstall

import (
	"slices"
	"testing"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// The run's steps follow the plan's releases by their roles: what the operator made is waited for
// once the operator, which re-creates it, is gone (with no operator release, right after the custom
// resources); OpenShift's NFD instance goes before its operator; --purge's steps come last.
func TestStepsFollowThePlansReleases(t *testing.T) {
	rel := func(name string) PlannedRelease {
		return PlannedRelease{Name: name, Namespace: "gpu-operator", Role: roleOf(name)}
	}
	for _, tc := range []struct {
		name  string
		p     *Plan
		steps []string
	}{
		{name: "the operator's operands are waited for once it is gone",
			p: &Plan{Releases: []PlannedRelease{rel(plan.MonitoringRelease), rel(plan.OperatorRelease), rel(plan.NFDRelease)}},
			steps: []string{"delete-custom-resources", "uninstall-gpu-monitoring", "uninstall-gpu-operator", "wait-operands", "uninstall-node-feature-discovery",
				"untaint", "node-labels", "record"}},
		{name: "without the operator, right after its custom resources",
			p:     &Plan{Releases: []PlannedRelease{rel(plan.NFDRelease)}},
			steps: []string{"delete-custom-resources", "wait-operands", "uninstall-node-feature-discovery", "untaint", "node-labels", "record"}},
		{name: "on OpenShift, the NFD instance before its operator; with --purge, its steps last",
			p: &Plan{Releases: []PlannedRelease{rel(plan.OperatorPackage), rel(nfdOperatorRelease)}, Purge: &PurgePlan{}},
			steps: []string{"delete-custom-resources", "uninstall-gpu-operator-certified", "wait-operands", "delete-nfd-instance", "uninstall-nfd-operator",
				"untaint", "node-labels", "purge-objects", "purge-crds", "purge-namespaces", "record"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ids []string
			for _, s := range newExecution(&Executor{Clients: &kube.Clients{}}, tc.p).steps() {
				ids = append(ids, s.ID)
			}
			if !slices.Equal(ids, tc.steps) {
				t.Errorf("steps\n%q\nwant\n%q", ids, tc.steps)
			}
		})
	}
}
