package bundle

import (
	"fmt"
	"slices"

	"github.com/Masterminds/semver/v3"
)

// Major is the GPU Operator major release of version: its year.month pair ("v26.3.3" → "26.3").
// NVIDIA versions the operator YY.MM.PP, and "the first two fields, YY.MM, identify a major version"
// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/platform-support.html,
// "NVIDIA GPU Operator Versioning").
func Major(version string) (string, error) {
	v, err := semver.NewVersion(version)
	if err != nil {
		return "", fmt.Errorf("GPU Operator version %q: %w", version, err)
	}
	return fmt.Sprintf("%d.%d", v.Major(), v.Minor()), nil
}

// Majors returns the newest catalog release of each major release, oldest major first: the releases
// an upgrade across majors goes through.
func Majors() []Bundle {
	var out []Bundle
	seen := map[string]bool{}
	for _, b := range catalog() { // newest first
		m, err := Major(b.Version)
		if err != nil || seen[m] {
			continue
		}
		seen[m] = true
		out = append(out, b)
	}
	slices.Reverse(out)
	return out
}
