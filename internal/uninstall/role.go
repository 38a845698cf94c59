package uninstall

import (
	"strings"

	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
)

// Role is what a release is to the stack. Releases are uninstalled in the order of their roles, the
// reverse of install's.
type Role int

const (
	// RoleMonitoring is gpuctl's gpu-monitoring release. Installed after the operator, it goes first:
	// its dashboard and alerts mean nothing without it.
	RoleMonitoring Role = iota
	// RoleOperator is NVIDIA's GPU operator: the gpu-operator release, or on OpenShift the OLM release
	// of its certified package.
	RoleOperator
	// RoleDriverInstaller is Google's driver installer on GKE (a release per node image).
	RoleDriverInstaller
	// RoleNFD is Node Feature Discovery: its release, or on OpenShift Red Hat's NFD Operator's.
	RoleNFD
)

// nfdOperatorRelease is the OLM release of Red Hat's NFD Operator on OpenShift (internal/plan's
// openshift.go names it so).
const nfdOperatorRelease = "nfd-operator"

// roleOf is the role of the release of gpuctl's called name.
func roleOf(name string) Role {
	switch {
	case name == plan.MonitoringRelease:
		return RoleMonitoring
	case name == plan.OperatorRelease || name == plan.OperatorPackage:
		return RoleOperator
	case strings.HasPrefix(name, plan.GKEDriverInstaller):
		return RoleDriverInstaller
	}
	return RoleNFD // node-feature-discovery, nfd-operator
}

// unrecordedNames are the release names gpuctl installs under, looked for when there is no install
// record (an install by an older gpuctl, or a record someone deleted).
func unrecordedNames() []string {
	return []string{plan.MonitoringRelease, plan.OperatorRelease, plan.GKEDriverInstaller + "-cos", plan.GKEDriverInstaller + "-ubuntu", plan.NFDRelease}
}

// Options are the choices an uninstall's plan depends on.
type Options struct {
	// Purge also deletes the CRDs, namespaces and other objects gpuctl created (never ones it found).
	Purge bool
	// Force lets Purge delete CRDs that have custom resources gpuctl did not create (without it:
	// ForeignResourcesError).
	Force bool
	// Adopt takes the releases of gpuctl's names as gpuctl's when there is no install record (without
	// it: UnrecordedError).
	Adopt bool
}

// whose says whose node labels gpuctl may give back: NFD's when gpuctl installed NFD, the
// operator's when it installed the operator. Without a record, only what --adopt takes is gpuctl's.
func whose(rec *record.Record, adopt bool) (nfd, operator bool) {
	if rec == nil {
		return adopt, adopt
	}
	return recorded(rec, plan.NFDRelease, nfdOperatorRelease), recorded(rec, plan.OperatorRelease, plan.OperatorPackage)
}

// recorded says whether the record names a release of one of names.
func recorded(rec *record.Record, names ...string) bool {
	for _, n := range names {
		if rec.Release(n) != nil {
			return true
		}
	}
	return false
}
