package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

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

func main() {
	lib := flag.String("lib", "", "path of libnvidia-ml.so.1 (default: the loader's search)")
	rounds := flag.Int("stress", 200, "rounds of concurrent calls and garbage collection")
	flag.Parse()
	var opts []nvml.LibraryOption
	if *lib != "" {
		opts = append(opts, nvml.WithLibraryPath(*lib))
	}
	p := &probe{nvml: nvml.New(opts...)}
	if r := p.nvml.Init(); r != nvml.SUCCESS {
		log.Fatalf("nvmlInit: %v", r)
	}
	p.devices = device.New(p.nvml)
	report := p.report()
	p.checks(*rounds)
	if r := p.nvml.Shutdown(); r != nvml.SUCCESS {
		p.problem("nvmlShutdown: %v", r)
	}
	// After the last nvmlShutdown the library answers NVML_ERROR_UNINITIALIZED.
	if _, r := p.nvml.DeviceGetCount(); r != nvml.ERROR_UNINITIALIZED {
		p.problem("nvmlDeviceGetCount after nvmlShutdown: %v, want ERROR_UNINITIALIZED", r)
	}
	report.Problems = p.problems
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(report); err != nil {
		log.Fatal(err)
	}
}

type probe struct {
	nvml     nvml.Interface
	devices  device.Interface
	problems []string
}

func (p *probe) problem(format string, args ...any) {
	p.problems = append(p.problems, fmt.Sprintf(format, args...))
}
