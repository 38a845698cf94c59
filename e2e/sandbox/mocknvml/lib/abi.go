package main

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The nvml.h structs that hold handles, which go-nvml's Go types for them do not mirror (they hold
// Go interfaces): same fields, handles as uintptr. go-nvml's own cgo -godefs mirrors of them are
// unexported (nvmlGpuInstanceInfo, nvmlComputeInstanceInfo in pkg/nvml/types_gen.go); the tests read
// these back through go-nvml.

// gpuInstanceInfo is nvmlGpuInstanceInfo_t.
type gpuInstanceInfo struct {
	Device    uintptr
	ID        uint32
	ProfileID uint32
	Placement nvml.GpuInstancePlacement
}

// computeInstanceInfo is nvmlComputeInstanceInfo_t.
type computeInstanceInfo struct {
	Device      uintptr
	GpuInstance uintptr
	ID          uint32
	ProfileID   uint32
	Placement   nvml.ComputeInstancePlacement
}
