package mocknvml

import (
	"strings"
)

// Model is what the mock knows of a GPU product: the facts NVML reports for it.
type Model struct {
	// Name is the product name nvmlDeviceGetName returns ("NVIDIA A100-SXM4-40GB"); GPU feature
	// discovery labels nvidia.com/gpu.product with it, spaces replaced by "-".
	Name string
	// MemoryMiB is the total memory nvmlDeviceGetMemoryInfo reports, in MiB (GFD's nvidia.com/gpu.memory).
	MemoryMiB uint64
	// Architecture is go-nvlib's name of the architecture nvmlDeviceGetArchitecture reports ("Ampere";
	// github.com/NVIDIA/go-nvlib pkg/nvlib/device/device.go, GetArchitectureAsString).
	Architecture string
	// ComputeMajor and ComputeMinor are the CUDA compute capability.
	ComputeMajor, ComputeMinor int
	// PCIDeviceID is nvmlPciInfo_t.pciDeviceId: the PCI device ID in the upper 16 bits, NVIDIA's
	// vendor ID 0x10de in the lower.
	PCIDeviceID uint32
	// MIGProfiles are the GPU instance profiles the model offers, in NVML's profile ID order; empty for
	// a GPU without MIG.
	MIGProfiles []string
}

// MIGCapable reports whether the model supports MIG.
func (m Model) MIGCapable() bool { return len(m.MIGProfiles) > 0 }

// Names of the models the mock knows (as NVML reports them).
const (
	A100SXM440GB = "NVIDIA A100-SXM4-40GB"
	A100SXM480GB = "NVIDIA A100-SXM4-80GB"
	A100PCIe80GB = "NVIDIA A100 80GB PCIe"
	H100SXM80GB  = "NVIDIA H100 80GB HBM3"
	TeslaT4      = "Tesla T4"
	L4           = "NVIDIA L4"
	A10G         = "NVIDIA A10G"
	L40S         = "NVIDIA L40S"
	RTXA6000     = "NVIDIA RTX A6000"
)

// Memory sizes and the A100-40GB's MIG profiles agree with go-nvml's own mock
// (github.com/NVIDIA/go-nvml pkg/nvml/mock/dgxa100 at the version go.mod selects: 42949672960 bytes,
// mig-profile.go); the other models' sizes are what nvidia-smi reports on them (the same figures as
// the sandbox's DRA stand-in, standin/dra/slice.go). MIG profile names are NVIDIA's MIG user guide's
// ("Supported MIG Profiles"). PCI device IDs are those of the sandbox's NFD stand-in
// (standin.GPUModels); the A100-SXM4-80GB's, 0x20b2, is from public lspci dumps.
var models = []Model{
	{A100SXM440GB, 40960, "Ampere", 8, 0, 0x20b010de, a100Profiles("5", "10", "20", "40")},
	{A100SXM480GB, 81920, "Ampere", 8, 0, 0x20b210de, a100Profiles("10", "20", "40", "80")},
	{A100PCIe80GB, 81920, "Ampere", 8, 0, 0x20b510de, a100Profiles("10", "20", "40", "80")},
	{H100SXM80GB, 81559, "Hopper", 9, 0, 0x233010de, a100Profiles("10", "20", "40", "80")},
	{TeslaT4, 15360, "Turing", 7, 5, 0x1eb810de, nil},
	{L4, 23034, "Ada Lovelace", 8, 9, 0x27b810de, nil},
	{A10G, 23028, "Ampere", 8, 6, 0x223710de, nil},
	{L40S, 46068, "Ada Lovelace", 8, 9, 0x26b910de, nil},
	{RTXA6000, 49140, "Ampere", 8, 6, 0x223010de, nil},
}

// a100Profiles are the seven GPU instance profiles of the A100 and H100 generation, by NVML profile ID
// (GPU_INSTANCE_PROFILE_1_SLICE=0, 2_SLICE=1, 3_SLICE=2, 4_SLICE=3, 7_SLICE=4, 1_SLICE_REV1=7,
// 1_SLICE_REV2=9 in go-nvml's const.go), named for the memory of 1/8, 2/8, 4/8 and all of the GPU.
func a100Profiles(eighth, quarter, half, full string) []string {
	return []string{
		"1g." + eighth + "gb", "2g." + quarter + "gb", "3g." + half + "gb", "4g." + half + "gb",
		"7g." + full + "gb", "1g." + eighth + "gb+me", "1g." + quarter + "gb",
	}
}

// Models lists the GPU models the mock knows.
func Models() []Model {
	out := make([]Model, len(models))
	copy(out, models)
	return out
}

// LookupModel finds a model by NVML's product name ("Tesla T4") or by GPU feature discovery's
// nvidia.com/gpu.product label of it ("Tesla-T4").
func LookupModel(name string) (Model, bool) {
	for _, m := range models {
		if m.Name == name || strings.ReplaceAll(m.Name, " ", "-") == name {
			return m, true
		}
	}
	return Model{}, false
}
