// Package probereport is the document the mock NVML's probe (package probe, cgo) prints: what
// go-nvml and go-nvlib read of the library. It is cgo-free, so the tests that run the probe decode
// the same types it encodes.
package probereport

// Report is what the probe prints.
type Report struct {
	DriverVersion     string   `json:"driverVersion"`
	NVMLVersion       string   `json:"nvmlVersion"`
	CUDADriverVersion int      `json:"cudaDriverVersion"`
	GPUs              []GPU    `json:"gpus"`
	Problems          []string `json:"problems,omitempty"`
}

// GPU is one GPU as go-nvml and go-nvlib report it.
type GPU struct {
	Name              string `json:"name"`
	UUID              string `json:"uuid"`
	PCIBusID          string `json:"pciBusID"`
	Architecture      string `json:"architecture"`
	Brand             string `json:"brand"`
	ComputeCapability string `json:"computeCapability"`
	MemoryMiB         uint64 `json:"memoryMiB"`
	Minor             int    `json:"minor"`
	MIGCapable        bool   `json:"migCapable"`
	MIGEnabled        bool   `json:"migEnabled"`
	MIGDevices        []MIG  `json:"migDevices,omitempty"`
}

// MIG is one MIG device.
type MIG struct {
	UUID              string `json:"uuid"`
	Profile           string `json:"profile"`
	MemoryMiB         uint64 `json:"memoryMiB"`
	GPUInstanceID     int    `json:"gpuInstanceID"`
	ComputeInstanceID int    `json:"computeInstanceID"`
	// Multiprocessors and the slice counts are nvmlDeviceGetAttributes_v2's.
	Multiprocessors uint32 `json:"multiprocessors"`
	GPUSlices       uint32 `json:"gpuSlices"`
	ComputeSlices   uint32 `json:"computeSlices"`
	// ProfileName is nvmlDeviceGetGpuInstanceProfileInfoV's name of the GPU instance profile.
	ProfileName string `json:"profileName"`
}
