package plan

import (
	"fmt"

	"github.com/Masterminds/semver/v3"
)

// VersionChange says how an upgrade moves the operator release.
type VersionChange string

// Version changes.
const (
	VersionSame      VersionChange = "same"
	VersionUpgrade   VersionChange = "upgrade"
	VersionDowngrade VersionChange = "downgrade"
)

// CheckVersions is upgrade's semver guard: moving to an older operator release than the installed one
// is refused unless force (the operator does not support it: a newer release's CRDs and ClusterPolicy
// fields stay behind, and gpuctl never narrows a CRD).
func CheckVersions(from, to string, force bool) (VersionChange, error) {
	if from == "" {
		// An install by an older gpuctl records no version: nothing to guard against.
		return VersionUpgrade, nil
	}
	f, err := semver.NewVersion(from)
	if err != nil {
		return "", fmt.Errorf("installed operator release %q: %w", from, err)
	}
	t, err := semver.NewVersion(to)
	if err != nil {
		return "", fmt.Errorf("%w: --operator-version %q: %w", ErrInput, to, err)
	}
	switch {
	case t.Equal(f):
		return VersionSame, nil
	case t.GreaterThan(f):
		return VersionUpgrade, nil
	case force:
		return VersionDowngrade, nil
	}
	return VersionDowngrade, fmt.Errorf("%w: %s is older than the installed GPU Operator %s: gpuctl does not downgrade without --force "+
		"(NVIDIA supports upgrades only; the newer release's CRDs stay, gpuctl never narrows them)", ErrInput, to, from)
}

// UpgradeNotes are what NVIDIA's upgrade guide asks for between two operator releases, and how gpuctl
// meets it (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/upgrade.html).
func UpgradeNotes(from, to string, driverEnabled bool) []string {
	var notes []string
	if from == to {
		return nil
	}
	notes = append(notes, "NVIDIA's upgrade guide: apply the new release's CRDs before the chart, because Helm never upgrades CRDs; gpuctl server-side applies "+to+"'s CRDs first (never narrowing them)")
	f, ferr := semver.NewVersion(from)
	t, terr := semver.NewVersion(to)
	if ferr == nil && terr == nil {
		if t.Major() != f.Major() {
			notes = append(notes, fmt.Sprintf("%s → %s crosses a release year: read NVIDIA's release notes of every release in between (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/release-notes.html); the values you set that %s does not read and the defaults that change are listed under Values", from, to, to))
		}
	}
	if driverEnabled {
		notes = append(notes, "the operator's upgrade controller replaces the driver node by node (driver.upgradePolicy: autoUpgrade true, maxParallelUpgrades 1 by default, NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0): GPU pods on a node are evicted while its driver is replaced; gpuctl waits for nvidia.com/gpu-driver-upgrade-state to settle on every GPU node")
	} else {
		notes = append(notes, "the driver is not the operator's here (driver.enabled=false): upgrade the host driver yourself if the new release needs a newer one")
	}
	return notes
}
