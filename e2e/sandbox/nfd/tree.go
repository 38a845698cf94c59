package nfd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// nvidiaVendor is NVIDIA's PCI vendor ID.
const nvidiaVendor = "10de"

// writeTree writes the host paths an nfd-worker reads on a node with hardware hw and kernel release
// kernel into dir, laid out as on the node (dir/sys/…, dir/etc/os-release, …):
//
//   - sys/bus/pci/devices/<address>/{class,vendor,device,subsystem_vendor,subsystem_device}, the
//     mandatory attributes NFD's pci source reads (source/pci/utils.go, v0.19.0): a host bridge on
//     every node, and one device per GPU with the product's class (0302 or 0300) and IDs;
//   - etc/os-release and usr/lib/os-release with ID, VERSION_ID and OSTREE_VERSION (NFD's system
//     source reads the first it finds);
//   - proc/sys/kernel/osrelease, bind-mounted over the worker's own /proc/sys/kernel/osrelease: NFD's
//     kernel source reads that path without the host prefix (source/kernel/version.go), since a
//     container shares its node's kernel;
//   - proc/swaps (header only: no swap), and empty boot, lib and var.
//
// The memory, USB, network and storage sources find nothing here and report so in the worker's log;
// the CPU source (CPUID) and kernel-config (/proc/config.gz, unprefixed) report this machine's, as a
// container's report its host's.
func writeTree(dir string, hw standin.Hardware, kernel string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	files := map[string]string{
		"proc/sys/kernel/osrelease": kernel + "\n",
		"proc/swaps":                "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n",
		"etc/os-release":            osRelease(hw),
		"usr/lib/os-release":        osRelease(hw),
	}
	pci := func(addr, class, vendor, device, subVendor, subDevice string) {
		base := "sys/bus/pci/devices/" + addr + "/"
		files[base+"class"] = "0x" + class + "00\n"
		files[base+"vendor"] = "0x" + vendor + "\n"
		files[base+"device"] = "0x" + device + "\n"
		files[base+"subsystem_vendor"] = "0x" + subVendor + "\n"
		files[base+"subsystem_device"] = "0x" + subDevice + "\n"
	}
	pci("0000:00:00.0", "0600", "8086", "1237", "1af4", "1100") // a host bridge (QEMU's i440FX), never whitelisted
	if hw.GPUs > 0 {
		m := standin.GPUModelFor(hw.GPUProduct)
		class := hw.GPUPCIClass
		if class == "" {
			class = m.Class
		}
		if class == "" {
			class = "0302"
		}
		device, sub := m.Device, m.Subsystem
		if device == "" { // a product the sandbox has no IDs for
			device, sub = "0000", "0000"
		}
		for i := range hw.GPUs {
			pci(fmt.Sprintf("0000:%02x:00.0", 0x10+i), class, nvidiaVendor, device, nvidiaVendor, sub)
		}
	}
	for _, d := range []string{"boot", "lib", "var"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// osRelease is the node's /etc/os-release as far as the sandbox knows it.
func osRelease(hw standin.Hardware) string {
	var b strings.Builder
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%s=%q\n", k, v)
		}
	}
	line("ID", hw.OSReleaseID)
	line("VERSION_ID", hw.OSVersionID)
	line("OSTREE_VERSION", hw.OSTreeVersion)
	return b.String()
}
