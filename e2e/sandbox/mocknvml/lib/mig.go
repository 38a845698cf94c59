package main

import "C"

import (
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml/internal/mockserver"
)

// MIG: what go-nvlib asks to decide whether a GPU is MIG capable or enabled and to walk its MIG
// devices and name their profiles (pkg/nvlib/device/device.go: IsMigCapable, IsMigEnabled,
// VisitMigDevices; mig_device.go: GetProfile), and what the device plugin asks of a MIG device
// (internal/rm/nvml_devices.go and health.go at v0.19.0: parent, GPU and compute instance IDs).

//export nvmlDeviceGetMigMode
func nvmlDeviceGetMigMode(device uintptr, current, pending *uint32) int32 {
	return onDevice("nvmlDeviceGetMigMode", device, func(d nvml.Device) nvml.Return {
		c, p, r := d.GetMigMode()
		if r != nvml.SUCCESS {
			return r
		}
		if r := putUint(current, c); r != nvml.SUCCESS {
			return r
		}
		return putUint(pending, p)
	})
}

//export nvmlDeviceGetMaxMigDeviceCount
func nvmlDeviceGetMaxMigDeviceCount(device uintptr, count *uint32) int32 {
	return deviceUint("nvmlDeviceGetMaxMigDeviceCount", device, count, nvml.Device.GetMaxMigDeviceCount)
}

//export nvmlDeviceGetMigDeviceHandleByIndex
func nvmlDeviceGetMigDeviceHandleByIndex(device uintptr, index uint32, mig *uintptr) int32 {
	return onDevice("nvmlDeviceGetMigDeviceHandleByIndex", device, func(d nvml.Device) nvml.Return {
		m, r := d.GetMigDeviceHandleByIndex(int(index))
		if r != nvml.SUCCESS {
			return r
		}
		return putHandle(mig, m)
	})
}

//export nvmlDeviceGetDeviceHandleFromMigDeviceHandle
func nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig uintptr, device *uintptr) int32 {
	return onDevice("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", mig, func(m nvml.Device) nvml.Return {
		d, r := m.GetDeviceHandleFromMigDeviceHandle()
		if r != nvml.SUCCESS {
			return r
		}
		return putHandle(device, d)
	})
}

//export nvmlDeviceIsMigDeviceHandle
func nvmlDeviceIsMigDeviceHandle(device uintptr, isMig *uint32) int32 {
	return deviceUint("nvmlDeviceIsMigDeviceHandle", device, isMig, func(d nvml.Device) (int, nvml.Return) {
		is, r := d.IsMigDeviceHandle()
		if is {
			return 1, r
		}
		return 0, r
	})
}

//export nvmlDeviceGetGpuInstanceId
func nvmlDeviceGetGpuInstanceId(device uintptr, id *uint32) int32 {
	return deviceUint("nvmlDeviceGetGpuInstanceId", device, id, nvml.Device.GetGpuInstanceId)
}

//export nvmlDeviceGetComputeInstanceId
func nvmlDeviceGetComputeInstanceId(device uintptr, id *uint32) int32 {
	return deviceUint("nvmlDeviceGetComputeInstanceId", device, id, nvml.Device.GetComputeInstanceId)
}

func attributes(name string, device uintptr, attrs unsafe.Pointer) int32 {
	return onDevice(name, device, func(d nvml.Device) nvml.Return {
		a, r := d.GetAttributes()
		return put(attrs, a, r)
	})
}

// nvmlDeviceGetAttributes and _v2 fill the same nvmlDeviceAttributes_t; go-nvml prefers _v2.
//
//export nvmlDeviceGetAttributes
func nvmlDeviceGetAttributes(device uintptr, attrs unsafe.Pointer) int32 {
	return attributes("nvmlDeviceGetAttributes", device, attrs)
}

//export nvmlDeviceGetAttributes_v2
func nvmlDeviceGetAttributes_v2(device uintptr, attrs unsafe.Pointer) int32 {
	return attributes("nvmlDeviceGetAttributes_v2", device, attrs)
}

//export nvmlDeviceGetGpuInstanceProfileInfo
func nvmlDeviceGetGpuInstanceProfileInfo(device uintptr, profile uint32, info unsafe.Pointer) int32 {
	return onDevice("nvmlDeviceGetGpuInstanceProfileInfo", device, func(d nvml.Device) nvml.Return {
		p, r := d.GetGpuInstanceProfileInfo(int(profile))
		return put(info, p, r)
	})
}

// nvmlDeviceGetGpuInstanceProfileInfoV fills nvmlGpuInstanceProfileInfo_v2_t or _v3_t, by the
// version the caller sets; the name is go-nvlib's, prefixed "MIG " as nvidia-smi shows them.
//
//export nvmlDeviceGetGpuInstanceProfileInfoV
func nvmlDeviceGetGpuInstanceProfileInfoV(device uintptr, profile uint32, info unsafe.Pointer) int32 {
	return onDevice("nvmlDeviceGetGpuInstanceProfileInfoV", device, func(d nvml.Device) nvml.Return {
		p, r := d.GetGpuInstanceProfileInfo(int(profile))
		if r != nvml.SUCCESS || info == nil {
			return orInvalid(r, info)
		}
		name := mockserver.ProfileName(d, p)
		switch v := *(*uint32)(info); version(v) {
		case 2:
			out := nvml.GpuInstanceProfileInfo_v2{Version: v, Id: p.Id, IsP2pSupported: p.IsP2pSupported,
				SliceCount: p.SliceCount, InstanceCount: p.InstanceCount, MultiprocessorCount: p.MultiprocessorCount,
				CopyEngineCount: p.CopyEngineCount, DecoderCount: p.DecoderCount, EncoderCount: p.EncoderCount,
				JpegCount: p.JpegCount, OfaCount: p.OfaCount, MemorySizeMB: p.MemorySizeMB}
			copy(out.Name[:len(out.Name)-1], name)
			return put(info, out, nvml.SUCCESS)
		case 3:
			out := nvml.GpuInstanceProfileInfo_v3{Version: v, Id: p.Id,
				SliceCount: p.SliceCount, InstanceCount: p.InstanceCount, MultiprocessorCount: p.MultiprocessorCount,
				CopyEngineCount: p.CopyEngineCount, DecoderCount: p.DecoderCount, EncoderCount: p.EncoderCount,
				JpegCount: p.JpegCount, OfaCount: p.OfaCount, MemorySizeMB: p.MemorySizeMB}
			copy(out.Name[:len(out.Name)-1], name)
			return put(info, out, nvml.SUCCESS)
		}
		return nvml.ERROR_ARGUMENT_VERSION_MISMATCH
	})
}

// orInvalid is r, or NVML_ERROR_INVALID_ARGUMENT for a nil out parameter.
func orInvalid(r nvml.Return, out unsafe.Pointer) nvml.Return {
	if r == nvml.SUCCESS && out == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return r
}
