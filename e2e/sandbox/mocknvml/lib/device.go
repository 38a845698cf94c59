package main

import "C"

import (
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml/internal/mockserver"
)

// Device queries: what go-nvlib's device wrapper (pkg/nvlib/device/device.go: names, brand,
// architecture, PCI bus ID, compute capability) and NVIDIA's device plugin and GFD (internal/rm and
// internal/resource at v0.19.0: UUIDs, minor numbers for /dev/nvidiaN, memory for
// nvidia.com/gpu.memory) ask of a GPU or MIG device.

// onDevice runs f on the device behind handle h.
func onDevice(name string, h uintptr, f func(d nvml.Device) nvml.Return) int32 {
	return call(name, func(*mockserver.Server) nvml.Return {
		d, r := device(h)
		if r != nvml.SUCCESS {
			return r
		}
		return f(d)
	})
}

func deviceString(name string, h uintptr, buf *C.char, length uint32, get func(nvml.Device) (string, nvml.Return)) int32 {
	return onDevice(name, h, func(d nvml.Device) nvml.Return {
		v, r := get(d)
		if r != nvml.SUCCESS {
			return r
		}
		return putString(buf, length, v)
	})
}

//export nvmlDeviceGetName
func nvmlDeviceGetName(device uintptr, name *C.char, length uint32) int32 {
	return deviceString("nvmlDeviceGetName", device, name, length, nvml.Device.GetName)
}

//export nvmlDeviceGetUUID
func nvmlDeviceGetUUID(device uintptr, uuid *C.char, length uint32) int32 {
	return deviceString("nvmlDeviceGetUUID", device, uuid, length, nvml.Device.GetUUID)
}

func deviceUint(name string, h uintptr, out *uint32, get func(nvml.Device) (int, nvml.Return)) int32 {
	return onDevice(name, h, func(d nvml.Device) nvml.Return {
		v, r := get(d)
		if r != nvml.SUCCESS {
			return r
		}
		return putUint(out, v)
	})
}

//export nvmlDeviceGetMinorNumber
func nvmlDeviceGetMinorNumber(device uintptr, minor *uint32) int32 {
	return deviceUint("nvmlDeviceGetMinorNumber", device, minor, nvml.Device.GetMinorNumber)
}

//export nvmlDeviceGetIndex
func nvmlDeviceGetIndex(device uintptr, index *uint32) int32 {
	return deviceUint("nvmlDeviceGetIndex", device, index, nvml.Device.GetIndex)
}

//export nvmlDeviceGetBrand
func nvmlDeviceGetBrand(device uintptr, brand *uint32) int32 {
	return deviceUint("nvmlDeviceGetBrand", device, brand, func(d nvml.Device) (int, nvml.Return) {
		b, r := d.GetBrand()
		return int(b), r
	})
}

//export nvmlDeviceGetArchitecture
func nvmlDeviceGetArchitecture(device uintptr, arch *uint32) int32 {
	return deviceUint("nvmlDeviceGetArchitecture", device, arch, func(d nvml.Device) (int, nvml.Return) {
		a, r := d.GetArchitecture()
		return int(a), r
	})
}

//export nvmlDeviceGetCudaComputeCapability
func nvmlDeviceGetCudaComputeCapability(device uintptr, major, minor *int32) int32 {
	return onDevice("nvmlDeviceGetCudaComputeCapability", device, func(d nvml.Device) nvml.Return {
		ma, mi, r := d.GetCudaComputeCapability()
		if r != nvml.SUCCESS {
			return r
		}
		if r := putInt(major, ma); r != nvml.SUCCESS {
			return r
		}
		return putInt(minor, mi)
	})
}

//export nvmlDeviceGetMemoryInfo
func nvmlDeviceGetMemoryInfo(device uintptr, memory unsafe.Pointer) int32 {
	return onDevice("nvmlDeviceGetMemoryInfo", device, func(d nvml.Device) nvml.Return {
		m, r := d.GetMemoryInfo()
		return put(memory, m, r)
	})
}

// nvmlDeviceGetMemoryInfo_v2 fills nvmlMemory_v2_t, whose version the caller sets.
//
//export nvmlDeviceGetMemoryInfo_v2
func nvmlDeviceGetMemoryInfo_v2(device uintptr, memory unsafe.Pointer) int32 {
	return onDevice("nvmlDeviceGetMemoryInfo_v2", device, func(d nvml.Device) nvml.Return {
		if memory == nil {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		if version((*nvml.Memory_v2)(memory).Version) != 2 {
			return nvml.ERROR_ARGUMENT_VERSION_MISMATCH
		}
		m, r := d.GetMemoryInfo_v2()
		m.Version = (*nvml.Memory_v2)(memory).Version
		return put(memory, m, r)
	})
}

// nvmlDeviceGetPciInfo_v3 is the version go-nvml prefers (pkg/nvml/lib.go, updateVersionedSymbols);
// v1 and v2, which fill older layouts, are stubs.
//
//export nvmlDeviceGetPciInfo_v3
func nvmlDeviceGetPciInfo_v3(device uintptr, pci unsafe.Pointer) int32 {
	return onDevice("nvmlDeviceGetPciInfo_v3", device, func(d nvml.Device) nvml.Return {
		p, r := d.GetPciInfo()
		return put(pci, p, r)
	})
}

//export nvmlDeviceGetSupportedEventTypes
func nvmlDeviceGetSupportedEventTypes(device uintptr, types *uint64) int32 {
	return onDevice("nvmlDeviceGetSupportedEventTypes", device, func(d nvml.Device) nvml.Return {
		t, r := d.GetSupportedEventTypes()
		if r == nvml.SUCCESS && types == nil {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		if r == nvml.SUCCESS {
			*types = t
		}
		return r
	})
}

//export nvmlDeviceGetTopologyCommonAncestor
func nvmlDeviceGetTopologyCommonAncestor(device1, device2 uintptr, pathInfo *uint32) int32 {
	return onDevice("nvmlDeviceGetTopologyCommonAncestor", device1, func(d nvml.Device) nvml.Return {
		other, r := device(device2)
		if r != nvml.SUCCESS {
			return r
		}
		level, r := d.GetTopologyCommonAncestor(other)
		if r != nvml.SUCCESS {
			return r
		}
		return putUint(pathInfo, int(level))
	})
}

// put writes a successful answer v to the caller's struct at p, which has v's type: go-nvml's Go
// types are cgo -godefs of nvml.h's structs (pkg/nvml/types_gen.go), so they have the C layout.
func put[T any](p unsafe.Pointer, v T, r nvml.Return) nvml.Return {
	if r != nvml.SUCCESS {
		return r
	}
	if p == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	*(*T)(p) = v
	return nvml.SUCCESS
}

// version is the version number in a versioned struct's version field (nvml.h's NVML_STRUCT_VERSION:
// sizeof(struct) | version << 24).
func version(v uint32) uint32 { return v >> 24 }
