package nfd

import (
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// nfdLabelPrefix is the label namespace the NFD master writes feature labels under.
const LabelPrefix = "feature.node.kubernetes.io/"

var (
	// nfdKernelVersion splits a kernel release like NFD's kernel source does.
	nfdKernelVersion = regexp.MustCompile(`^(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-.*)?$`)
	// nfdOSVersion splits VERSION_ID like NFD's system source does.
	nfdOSVersion = regexp.MustCompile(`^(\d+)(?:\.(\d+))?(?:\..*)?$`)
	// nfdForbidden is what NFD replaces with "_" in the full kernel version to make it a label value.
	nfdForbidden = regexp.MustCompile(`[^-A-Za-z0-9_.]`)
)

// nfdLabels returns the feature labels an NFD v0.19 worker would report for a node with this hardware
// and nodeInfo, as the NFD master writes them (feature.node.kubernetes.io/…). It covers the labels the
// GPU operator reads:
//
//   - kernel-version.full, .major, .minor, .revision from nodeInfo.kernelVersion ("6.6.97+" becomes
//     "6.6.97": NFD replaces characters a label value cannot hold and trims the ends);
//   - system-os_release.ID, .VERSION_ID, .VERSION_ID.major, .VERSION_ID.minor from /etc/os-release
//     (VERSION_ID.minor only where VERSION_ID has one: COS "121" and Amazon Linux "2023" have none);
//   - system-os_release.OSTREE_VERSION where the node has one: OpenShift's NFD (the NFD Operator) adds
//     it on RHCOS and the GPU operator picks the Driver Toolkit image by it; upstream NFD does not;
//   - one PCI label for the node's NVIDIA GPUs, named by deviceLabelFields, the worker config's
//     sources.pci.deviceLabelFields: [class, vendor] (NFD's default, also used when the list is empty
//     or holds no known field) gives pci-0302_10de.present, [vendor] (the GPU operator's and
//     OpenShift's NFD config) gives pci-10de.present. Unknown fields are ignored as NFD ignores them.
//
// Other NFD labels (cpu-*, other PCI devices, storage, …) are left out: nothing in the GPU stack reads
// them. The NFD worker stand-in calls this to label nodes at run time.
func Labels(hw standin.Hardware, info corev1.NodeSystemInfo, deviceLabelFields []string) map[string]string {
	labels := map[string]string{}
	set := func(key, value string) {
		if value != "" {
			labels[LabelPrefix+key] = value
		}
	}

	full := strings.Trim(nfdForbidden.ReplaceAllString(info.KernelVersion, "_"), "-_.")
	set("kernel-version.full", full)
	if m := nfdKernelVersion.FindStringSubmatch(full); m != nil {
		set("kernel-version.major", m[1])
		set("kernel-version.minor", m[2])
		set("kernel-version.revision", m[3])
	}

	set("system-os_release.ID", hw.OSReleaseID)
	set("system-os_release.VERSION_ID", hw.OSVersionID)
	if m := nfdOSVersion.FindStringSubmatch(hw.OSVersionID); m != nil {
		set("system-os_release.VERSION_ID.major", m[1])
		set("system-os_release.VERSION_ID.minor", m[2])
	}
	set("system-os_release.OSTREE_VERSION", hw.OSTreeVersion)

	if hw.GPUs > 0 {
		set("pci-"+pciDeviceLabel(hw, deviceLabelFields)+".present", "true")
	}
	return labels
}

// pciDeviceLabel is NFD's device label for the node's GPUs: the chosen attributes joined by "_".
func pciDeviceLabel(hw standin.Hardware, deviceLabelFields []string) string {
	// The attributes NFD can put in a device label, in the order it puts them (node-feature-discovery
	// v0.19 source/pci sorts the configured fields into this order).
	var fields []string
	for _, f := range []string{"class", "vendor", "device", "subsystem_vendor", "subsystem_device"} {
		if slices.Contains(deviceLabelFields, f) {
			fields = append(fields, f)
		}
	}
	if len(fields) == 0 {
		fields = []string{"class", "vendor"}
	}

	class := hw.GPUPCIClass
	if class == "" {
		class = "0302"
	}
	model := standin.GPUModelFor(hw.GPUProduct)
	attrs := map[string]string{
		"class":            class,
		"vendor":           "10de", // NVIDIA's PCI vendor ID
		"device":           model.Device,
		"subsystem_vendor": "10de", // NVIDIA-branded boards, which is what clouds and OEM servers carry
		"subsystem_device": model.Subsystem,
	}
	var parts []string
	for _, f := range fields {
		if v := attrs[f]; v != "" { // a product the sandbox does not know has no device IDs
			parts = append(parts, v)
		}
	}
	return strings.Join(parts, "_")
}
