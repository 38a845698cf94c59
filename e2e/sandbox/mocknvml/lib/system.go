package main

import "C"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml/internal/mockserver"
)

// System queries: GPU feature discovery's version labels (internal/lm/nvml.go, newVersionLabeler, and
// internal/resource/nvml-lib.go at k8s-device-plugin v0.19.0) and the device enumeration of go-nvlib
// (pkg/nvlib/device/device.go, VisitDevices) and of the device plugin's health check
// (internal/rm/health.go: DeviceGetHandleByUUID).

//export nvmlSystemGetDriverVersion
func nvmlSystemGetDriverVersion(version *C.char, length uint32) int32 {
	return call("nvmlSystemGetDriverVersion", func(s *mockserver.Server) nvml.Return {
		v, r := s.SystemGetDriverVersion()
		if r != nvml.SUCCESS {
			return r
		}
		return putString(version, length, v)
	})
}

//export nvmlSystemGetNVMLVersion
func nvmlSystemGetNVMLVersion(version *C.char, length uint32) int32 {
	return call("nvmlSystemGetNVMLVersion", func(s *mockserver.Server) nvml.Return {
		v, r := s.SystemGetNVMLVersion()
		if r != nvml.SUCCESS {
			return r
		}
		return putString(version, length, v)
	})
}

func cudaDriverVersion(name string, out *int32) int32 {
	return call(name, func(s *mockserver.Server) nvml.Return {
		v, r := s.SystemGetCudaDriverVersion()
		if r == nvml.SUCCESS {
			r = putInt(out, v)
		}
		return r
	})
}

//export nvmlSystemGetCudaDriverVersion
func nvmlSystemGetCudaDriverVersion(version *int32) int32 {
	return cudaDriverVersion("nvmlSystemGetCudaDriverVersion", version)
}

//export nvmlSystemGetCudaDriverVersion_v2
func nvmlSystemGetCudaDriverVersion_v2(version *int32) int32 {
	return cudaDriverVersion("nvmlSystemGetCudaDriverVersion_v2", version)
}

func deviceCount(name string, out *uint32) int32 {
	return call(name, func(s *mockserver.Server) nvml.Return {
		n, r := s.DeviceGetCount()
		if r == nvml.SUCCESS {
			r = putUint(out, n)
		}
		return r
	})
}

//export nvmlDeviceGetCount
func nvmlDeviceGetCount(count *uint32) int32 { return deviceCount("nvmlDeviceGetCount", count) }

//export nvmlDeviceGetCount_v2
func nvmlDeviceGetCount_v2(count *uint32) int32 { return deviceCount("nvmlDeviceGetCount_v2", count) }

func handleByIndex(name string, index uint32, out *uintptr) int32 {
	return call(name, func(s *mockserver.Server) nvml.Return {
		d, r := s.DeviceGetHandleByIndex(int(index))
		if r != nvml.SUCCESS {
			return r
		}
		return putHandle(out, d)
	})
}

//export nvmlDeviceGetHandleByIndex
func nvmlDeviceGetHandleByIndex(index uint32, device *uintptr) int32 {
	return handleByIndex("nvmlDeviceGetHandleByIndex", index, device)
}

//export nvmlDeviceGetHandleByIndex_v2
func nvmlDeviceGetHandleByIndex_v2(index uint32, device *uintptr) int32 {
	return handleByIndex("nvmlDeviceGetHandleByIndex_v2", index, device)
}

//export nvmlDeviceGetHandleByUUID
func nvmlDeviceGetHandleByUUID(uuid *C.char, device *uintptr) int32 {
	return call("nvmlDeviceGetHandleByUUID", func(s *mockserver.Server) nvml.Return {
		if uuid == nil {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		d, r := s.DeviceGetHandleByUUID(C.GoString(uuid))
		if r != nvml.SUCCESS {
			return r
		}
		return putHandle(device, d)
	})
}

func handleByPCIBusID(name string, busID *C.char, out *uintptr) int32 {
	return call(name, func(s *mockserver.Server) nvml.Return {
		if busID == nil {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		d, r := s.DeviceGetHandleByPciBusId(C.GoString(busID))
		if r != nvml.SUCCESS {
			return r
		}
		return putHandle(out, d)
	})
}

//export nvmlDeviceGetHandleByPciBusId
func nvmlDeviceGetHandleByPciBusId(busID *C.char, device *uintptr) int32 {
	return handleByPCIBusID("nvmlDeviceGetHandleByPciBusId", busID, device)
}

//export nvmlDeviceGetHandleByPciBusId_v2
func nvmlDeviceGetHandleByPciBusId_v2(busID *C.char, device *uintptr) int32 {
	return handleByPCIBusID("nvmlDeviceGetHandleByPciBusId_v2", busID, device)
}

// putInt and putUint write an int answer to the caller's int* or unsigned int*.
func putInt(out *int32, v int) nvml.Return {
	if out == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	*out = int32(v)
	return nvml.SUCCESS
}

func putUint(out *uint32, v int) nvml.Return {
	if out == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	*out = uint32(v)
	return nvml.SUCCESS
}
