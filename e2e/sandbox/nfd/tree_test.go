package nfd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

func TestWriteTree(t *testing.T) {
	for _, tc := range []struct {
		name      string
		hw        standin.Hardware
		wantGPUs  int
		wantClass string
	}{
		{"an A100 node has a 3D controller of NVIDIA's per GPU", standin.Hardware{GPUs: 2, GPUProduct: standin.GPUA100SXM40, OSReleaseID: "ubuntu", OSVersionID: "22.04"}, 2, "0x030200"},
		{"a workstation GPU is a VGA controller", standin.Hardware{GPUs: 1, GPUProduct: standin.GPURTXA6000, GPUPCIClass: "0300"}, 1, "0x030000"},
		{"a CPU node has no NVIDIA device", standin.Hardware{}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := writeTree(dir, tc.hw, "6.8.0-1015-gcp"); err != nil {
				t.Fatal(err)
			}
			devs, err := filepath.Glob(filepath.Join(dir, "sys/bus/pci/devices/*"))
			if err != nil {
				t.Fatal(err)
			}
			gpus := 0
			for _, d := range devs {
				for _, attr := range []string{"class", "vendor", "device", "subsystem_vendor", "subsystem_device"} {
					if _, err := os.Stat(filepath.Join(d, attr)); err != nil {
						t.Errorf("%s: NFD's pci source needs %s: %v", d, attr, err)
					}
				}
				if read(t, filepath.Join(d, "vendor")) == "0x10de" {
					gpus++
					if got := read(t, filepath.Join(d, "class")); got != tc.wantClass {
						t.Errorf("%s: class %s, want %s", d, got, tc.wantClass)
					}
				}
			}
			if gpus != tc.wantGPUs {
				t.Errorf("%d NVIDIA devices, want %d", gpus, tc.wantGPUs)
			}
			if got := read(t, filepath.Join(dir, kernelRelease)); got != "6.8.0-1015-gcp" {
				t.Errorf("kernel release %q", got)
			}
			osr := read(t, filepath.Join(dir, "etc/os-release"))
			if tc.hw.OSReleaseID != "" && !strings.Contains(osr, `ID="`+tc.hw.OSReleaseID+`"`) {
				t.Errorf("os-release %q lacks ID %s", osr, tc.hw.OSReleaseID)
			}
		})
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
