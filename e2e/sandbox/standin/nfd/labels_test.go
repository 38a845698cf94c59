package nfd

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

func TestNFDLabels(t *testing.T) {
	const p = LabelPrefix
	ubuntuGPU := standin.Hardware{GPUs: 1, GPUPCIClass: "0302", GPUProduct: "NVIDIA-A100-SXM4-40GB", OSReleaseID: "ubuntu", OSVersionID: "22.04"}
	ubuntuInfo := corev1.NodeSystemInfo{KernelVersion: "5.15.0-153-generic"}
	osAndKernel := map[string]string{
		p + "kernel-version.full":                "5.15.0-153-generic",
		p + "kernel-version.major":               "5",
		p + "kernel-version.minor":               "15",
		p + "kernel-version.revision":            "0",
		p + "system-os_release.ID":               "ubuntu",
		p + "system-os_release.VERSION_ID":       "22.04",
		p + "system-os_release.VERSION_ID.major": "22",
		p + "system-os_release.VERSION_ID.minor": "04",
	}
	with := func(extra map[string]string) map[string]string {
		out := maps.Clone(osAndKernel)
		maps.Copy(out, extra)
		return out
	}

	tests := []struct {
		name   string
		hw     standin.Hardware
		info   corev1.NodeSystemInfo
		fields []string
		want   map[string]string
	}{
		{
			name: "NFD's default fields name the GPU by class and vendor",
			hw:   ubuntuGPU, info: ubuntuInfo, fields: nil,
			want: with(map[string]string{p + "pci-0302_10de.present": "true"}),
		},
		{
			name: "the GPU operator's fields name it by vendor only",
			hw:   ubuntuGPU, info: ubuntuInfo, fields: []string{"vendor"},
			want: with(map[string]string{p + "pci-10de.present": "true"}),
		},
		{
			name: "fields are put in NFD's order, not the config's",
			hw:   ubuntuGPU, info: ubuntuInfo, fields: []string{"device", "vendor"},
			want: with(map[string]string{p + "pci-10de_20b0.present": "true"}),
		},
		{
			name: "unknown fields are ignored and none left means the defaults",
			hw:   ubuntuGPU, info: ubuntuInfo, fields: []string{"bogus"},
			want: with(map[string]string{p + "pci-0302_10de.present": "true"}),
		},
		{
			name: "a VGA-class GPU gets the 0300 label",
			hw:   standin.Hardware{GPUs: 2, GPUPCIClass: "0300", GPUProduct: "NVIDIA-RTX-A6000", OSReleaseID: "ubuntu", OSVersionID: "22.04"},
			info: ubuntuInfo, fields: []string{"class", "vendor", "device", "subsystem_vendor", "subsystem_device"},
			want: with(map[string]string{p + "pci-0300_10de_2230_10de_1459.present": "true"}),
		},
		{
			name: "a node without GPUs gets no PCI label",
			hw:   standin.Hardware{OSReleaseID: "ubuntu", OSVersionID: "22.04"},
			info: ubuntuInfo, fields: []string{"vendor"},
			want: osAndKernel,
		},
		{
			name: "COS's kernel loses its plus sign and its VERSION_ID has no minor",
			hw:   standin.Hardware{GPUs: 1, GPUPCIClass: "0302", GPUProduct: "NVIDIA-A100-SXM4-40GB", OSReleaseID: "cos", OSVersionID: "121"},
			info: corev1.NodeSystemInfo{KernelVersion: "6.6.97+"}, fields: []string{"vendor"},
			want: map[string]string{
				p + "kernel-version.full":                "6.6.97",
				p + "kernel-version.major":               "6",
				p + "kernel-version.minor":               "6",
				p + "kernel-version.revision":            "97",
				p + "system-os_release.ID":               "cos",
				p + "system-os_release.VERSION_ID":       "121",
				p + "system-os_release.VERSION_ID.major": "121",
				p + "pci-10de.present":                   "true",
			},
		},
		{
			name: "RHCOS nodes also get OSTREE_VERSION",
			hw:   standin.Hardware{GPUs: 1, GPUPCIClass: "0302", GPUProduct: "NVIDIA-A10G", OSReleaseID: "rhcos", OSVersionID: "4.18", OSTreeVersion: "418.94.202503102036-0"},
			info: corev1.NodeSystemInfo{KernelVersion: "5.14.0-427.60.1.el9_4.x86_64"}, fields: []string{"vendor"},
			want: map[string]string{
				p + "kernel-version.full":                "5.14.0-427.60.1.el9_4.x86_64",
				p + "kernel-version.major":               "5",
				p + "kernel-version.minor":               "14",
				p + "kernel-version.revision":            "0",
				p + "system-os_release.ID":               "rhcos",
				p + "system-os_release.VERSION_ID":       "4.18",
				p + "system-os_release.VERSION_ID.major": "4",
				p + "system-os_release.VERSION_ID.minor": "18",
				p + "system-os_release.OSTREE_VERSION":   "418.94.202503102036-0",
				p + "pci-10de.present":                   "true",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Labels(tt.hw, tt.info, tt.fields)
			if !maps.Equal(got, tt.want) {
				t.Errorf("nfdLabels:\n got %v\nwant %v", got, tt.want)
			}
			for k, v := range got {
				if errs := content.IsLabelKey(k); len(errs) > 0 {
					t.Errorf("label key %q: %v", k, errs)
				}
				if errs := content.IsLabelValue(v); len(errs) > 0 {
					t.Errorf("label %s value %q: %v", k, v, errs)
				}
			}
		})
	}
}
