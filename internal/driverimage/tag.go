package driverimage

import (
	"regexp"
	"strings"
)

// PrecompiledTag is the tag of the precompiled driver image for a node: NVIDIA's controller appends
// "-<kernel>-<os tag>" to driver.version, where the kernel is the node's full kernel release
// (NFD's feature.node.kubernetes.io/kernel-version.full, uname -r) and the driver version is a branch
// ("595") for precompiled images (NVIDIA/gpu-operator controllers/object_controls.go resolveDriverTag
// and api/nvidia/v1alpha1/nvidiadriver_types.go GetPrecompiledImagePath, both @v26.7.0), e.g.
// 595-6.8.0-60-generic-ubuntu24.04.
func PrecompiledTag(version, kernel, osTag string) string {
	return version + "-" + kernel + "-" + osTag
}

// OSTag is the operator's OS tag for an os-release ID and VERSION_ID: the two joined, with only the
// major version for RHEL, Rocky and Oracle Linux ("ubuntu24.04", "rhel9"; NVIDIA/gpu-operator
// internal/state/nodepool.go getOSTag@v26.7.0).
func OSTag(id, versionID string) string {
	switch id {
	case "ol", "rocky", "rhel":
		versionID, _, _ = strings.Cut(versionID, ".")
	}
	return id + versionID
}

// osImages maps the start of a node's status.nodeInfo.osImage (the os-release PRETTY_NAME) to the
// os-release ID NFD would report. Only the OSes NVIDIA builds driver images for are listed
// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/platform-support.html).
var osImages = []struct {
	prefix, id string
}{
	{"Ubuntu ", "ubuntu"},
	{"Red Hat Enterprise Linux ", "rhel"},
	{"Rocky Linux ", "rocky"},
	{"Oracle Linux Server ", "ol"},
	{"SUSE Linux Enterprise Server ", "sles"},
}

var osVersion = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?`)

// OSTagFromImage derives the OS tag from a node's osImage ("Ubuntu 24.04.2 LTS" → "ubuntu24.04",
// "Red Hat Enterprise Linux 9.4 (Plow)" → "rhel9"), for nodes NFD has not labelled yet. Ubuntu's
// VERSION_ID has two parts where its PRETTY_NAME has three. It returns "" for an OS it does not know.
func OSTagFromImage(osImage string) string {
	for _, o := range osImages {
		rest, ok := strings.CutPrefix(osImage, o.prefix)
		if !ok {
			continue
		}
		v := osVersion.FindString(rest)
		if v == "" {
			return ""
		}
		if o.id == "sles" {
			// "SUSE Linux Enterprise Server 15 SP6": VERSION_ID is 15.6.
			if sp := regexp.MustCompile(`^[0-9]+ SP([0-9]+)`).FindStringSubmatch(rest); sp != nil {
				v += "." + sp[1]
			}
		}
		return OSTag(o.id, v)
	}
	return ""
}

// nfdForbidden is what NFD replaces with "_" in a kernel release to make it a label value.
var nfdForbidden = regexp.MustCompile(`[^-A-Za-z0-9_.]`)

// KernelLabel is a kernel release ("6.6.97+") as NFD's feature.node.kubernetes.io/kernel-version.full
// label holds it ("6.6.97"): the characters a label value cannot hold become "_" and the ends are
// trimmed (kubernetes-sigs/node-feature-discovery source/kernel/kernel.go). NVIDIA's controller
// selects a precompiled driver's nodes by that label.
func KernelLabel(kernel string) string {
	return strings.Trim(nfdForbidden.ReplaceAllString(kernel, "_"), "-_.")
}

// Branch is the driver branch of a driver version ("580.95.05" → "580"): precompiled images are
// tagged by branch (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/precompiled-drivers.html).
func Branch(version string) string {
	b, _, _ := strings.Cut(version, ".")
	return b
}
