package distro

import "strings"

// OpenShift is Red Hat OpenShift's name.
const OpenShift = "openshift"

// openShift: its API groups (config.openshift.io holds ClusterVersion, which the GPU operator
// reads), node label node.openshift.io/os_id, kubelet "+<git hash>" builds, CRI-O
// (replicatedhq/troubleshoot pkg/analyze/distribution.go). gpuctl installs there as NVIDIA's
// OpenShift guide does, through OLM.
func openShift() Distribution {
	return Distribution{
		Name: OpenShift, Title: "Red Hat OpenShift", Short: "OpenShift", Profile: OpenShift,
		Signals: []Signal{
			{In: APIGroup, Name: "config.openshift.io", Weight: 80},
			{In: APIGroup, Name: "security.openshift.io", Weight: 40},
			{In: APIGroup, Name: "apps.openshift.io", Weight: 30},
			{In: Label, Keys: []string{"node.openshift.io/os_id"}, Weight: 60},
			// Only OpenShift builds its kubelet with a bare git hash after the "+" (v1.20.0+bd9e442); the
			// other distributions that stamp their builds put a name there (+k3s1, +rke2r1, +vmware.1, +k0s).
			{In: Version, Match: Match{Is: hasGitHashSuffix}, Weight: 60},
			// RHCOS is OpenShift's node OS and ships with it only ("Red Hat Enterprise Linux CoreOS 47.84…",
			// red-hat-storage/ocs-ci#3872); OpenShift's CRI-O builds carry "rhaos" (Red Hat OpenShift) in
			// their version ("cri-o://1.20.0-0.rhaos4.7.gitfdbdf43.el8.52", same source).
			{In: OSImage, Match: Match{Contains: []string{"Red Hat Enterprise Linux CoreOS"}}, Weight: 60},
			{In: Runtime, Match: Match{Prefix: "cri-o://", Contains: []string{".rhaos"}}, Weight: 60},
			{In: Runtime, Match: Match{Prefix: "cri-o://", Excludes: ".rhaos"}, Weight: 10},
			{In: ClusterVersion, Weight: 90, GivesVersion: true},
		},
		OLM: true,
		// OpenShift builds the driver with the Driver Toolkit; NVIDIA publishes no precompiled RHCOS driver.
		NoPrecompiledDriver: "on OpenShift the driver is built for each RHCOS release with the Driver Toolkit, and NVIDIA publishes precompiled drivers for Ubuntu only",
	}
}

// hasGitHashSuffix matches OpenShift's kubelet builds, "v1.23.5+70fb84c" (replicatedhq/troubleshoot
// pkg/analyze/distribution.go).
func hasGitHashSuffix(version string) bool {
	i := strings.LastIndex(version, "+")
	if i < 0 {
		return false
	}
	hash := version[i+1:]
	return len(hash) >= 7 && len(hash) <= 40 && isOf(hash, hexDigits)
}
