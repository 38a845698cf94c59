package uninstall

import (
	"slices"
	"testing"

	"github.com/gpuctl/gpuctl/internal/plan"
)

func TestReleasesAreUninstalledInReverseInstallOrder(t *testing.T) {
	s := &Snapshot{Releases: []InstalledRelease{{Name: plan.NFDRelease}, {Name: plan.GKEDriverInstaller + "-cos"}, {Name: plan.OperatorRelease}, {Name: plan.MonitoringRelease}}}
	var names []string
	var roles []Role
	for _, r := range plannedReleases(s) {
		names, roles = append(names, r.Name), append(roles, r.Role)
	}
	want := []string{plan.MonitoringRelease, plan.OperatorRelease, plan.GKEDriverInstaller + "-cos", plan.NFDRelease}
	if !slices.Equal(names, want) {
		t.Errorf("order %v, want %v (the dashboard and alerts go before the operator they watch)", names, want)
	}
	if wantRoles := []Role{RoleMonitoring, RoleOperator, RoleDriverInstaller, RoleNFD}; !slices.Equal(roles, wantRoles) {
		t.Errorf("roles %v, want %v", roles, wantRoles)
	}
}

func TestEveryReleaseNameHasItsRole(t *testing.T) {
	for name, want := range map[string]Role{
		plan.MonitoringRelease: RoleMonitoring, plan.OperatorRelease: RoleOperator, plan.OperatorPackage: RoleOperator,
		plan.GKEDriverInstaller + "-ubuntu": RoleDriverInstaller, plan.NFDRelease: RoleNFD, nfdOperatorRelease: RoleNFD,
	} {
		if got := roleOf(name); got != want {
			t.Errorf("roleOf(%q) = %v, want %v", name, got, want)
		}
	}
}
