package standin

// Hardware is what a simulated node has that the API cannot show until something inspects it. The
// stand-ins read it: the NFD worker stand-in turns it into feature labels, the device-plugin stand-in
// into the nvidia.com/gpu extended resource.
type Hardware struct {
	// GPUs is the number of NVIDIA GPUs (PCI vendor 10de); 0 on CPU nodes.
	GPUs int
	// GPUPCIClass is the PCI class of those GPUs: "0302" (3D controller, data-centre GPUs) or "0300" (VGA).
	GPUPCIClass string
	// GPUProduct is the product name the GPU reports (e.g. "NVIDIA-A100-SXM4-40GB").
	GPUProduct string
	// OSReleaseID, OSVersionID and OSTreeVersion are the ID, VERSION_ID and OSTREE_VERSION fields of the
	// node's /etc/os-release (OSTreeVersion only on RHCOS).
	OSReleaseID, OSVersionID, OSTreeVersion string
}

// GPU products the flavours use, as GPU feature discovery names them (nvidia.com/gpu.product).
const (
	GPUA100SXM40  = "NVIDIA-A100-SXM4-40GB"
	GPUA100PCIe80 = "NVIDIA-A100-80GB-PCIe"
	GPUA10G       = "NVIDIA-A10G"
	GPUL4         = "NVIDIA-L4"
	GPUH100SXM80  = "NVIDIA-H100-80GB-HBM3"
	GPUL40S       = "NVIDIA-L40S"
	GPUT4         = "Tesla-T4"
	GPURTXA6000   = "NVIDIA-RTX-A6000"
	// A vGPU (NVIDIA AI Enterprise) A100 time-sliced compute profile as a TKGS guest VM sees it; the
	// name follows nvidia-smi's "NVIDIA A100-40C" naming in vGPU guests (uncertain).
	GPUA100vGPU40C = "NVIDIA-A100-40C"
)

// gpuModel is what a GPU product shows on the PCI bus: its class and device ID (lspci -nn) and its
// board's subsystem device ID.
type GPUModel struct {
	Product, Class, Device, Subsystem string
}

// gpuModels are the PCI facts of the GPU products above. Device and subsystem IDs are from public
// lspci -nn dumps; the subsystem IDs are best effort and only matter when an NFD config asks for
// subsystem_device.
func GPUModels() []GPUModel {
	return []GPUModel{
		{GPUA100SXM40, "0302", "20b0", "134f"},
		{GPUA100PCIe80, "0302", "20b5", "1533"},
		{GPUA10G, "0302", "2237", "152f"},
		{GPUL4, "0302", "27b8", "16ca"},
		{GPUH100SXM80, "0302", "2330", "16c1"},
		{GPUL40S, "0302", "26b9", "1851"},
		{GPUT4, "0302", "1eb8", "12a2"},
		// A workstation card with display outputs: PCI class 0300 (VGA), not 0302 (3D controller).
		{GPURTXA6000, "0300", "2230", "1459"},
		{GPUA100vGPU40C, "0302", "20f1", "145f"},
	}
}

// gpuModelFor returns the PCI facts of a GPU product; a product the sandbox does not know has none.
func GPUModelFor(product string) GPUModel {
	for _, m := range GPUModels() {
		if m.Product == product {
			return m
		}
	}
	return GPUModel{Product: product}
}
