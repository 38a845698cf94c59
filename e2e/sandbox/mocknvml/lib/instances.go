package main

import "C"

import (
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml/internal/mockserver"
)

// GPU and compute instances: what go-nvlib reads to name a MIG device's profile
// (pkg/nvlib/device/mig_device.go, GetProfile: GetGpuInstanceById, GetComputeInstanceById, their
// infos and profile infos) and what mig-parted-style callers list.

// putHandles writes the handles of objs to the caller's array, whose size is *count on the way in
// (go-nvml passes the profile's instance count), and their number to *count.
func putHandles[T any](out unsafe.Pointer, count *uint32, objs []T) nvml.Return {
	if out == nil || count == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	if uint32(len(objs)) > *count {
		*count = uint32(len(objs))
		return nvml.ERROR_INSUFFICIENT_SIZE
	}
	dst := unsafe.Slice((*uintptr)(out), len(objs))
	for i, o := range objs {
		if r := putHandle(&dst[i], o); r != nvml.SUCCESS {
			return r
		}
	}
	*count = uint32(len(objs))
	return nvml.SUCCESS
}

//export nvmlDeviceGetGpuInstances
func nvmlDeviceGetGpuInstances(device uintptr, profileID uint32, instances unsafe.Pointer, count *uint32) int32 {
	return onDevice("nvmlDeviceGetGpuInstances", device, func(d nvml.Device) nvml.Return {
		gis, r := d.GetGpuInstances(&nvml.GpuInstanceProfileInfo{Id: profileID})
		if r != nvml.SUCCESS {
			return r
		}
		return putHandles(instances, count, gis)
	})
}

//export nvmlDeviceGetGpuInstanceById
func nvmlDeviceGetGpuInstanceById(device uintptr, id uint32, instance *uintptr) int32 {
	return onDevice("nvmlDeviceGetGpuInstanceById", device, func(d nvml.Device) nvml.Return {
		gi, r := d.GetGpuInstanceById(int(id))
		if r != nvml.SUCCESS {
			return r
		}
		return putHandle(instance, gi)
	})
}

// onGpuInstance runs f on the GPU instance behind handle h.
func onGpuInstance(name string, h uintptr, f func(gi nvml.GpuInstance) nvml.Return) int32 {
	return call(name, func(*mockserver.Server) nvml.Return {
		gi, r := gpuInstance(h)
		if r != nvml.SUCCESS {
			return r
		}
		return f(gi)
	})
}

//export nvmlGpuInstanceGetInfo
func nvmlGpuInstanceGetInfo(instance uintptr, info unsafe.Pointer) int32 {
	return onGpuInstance("nvmlGpuInstanceGetInfo", instance, func(gi nvml.GpuInstance) nvml.Return {
		i, r := gi.GetInfo()
		if r != nvml.SUCCESS {
			return r
		}
		dev, r := handles.handleOf(i.Device)
		if r != nvml.SUCCESS {
			return r
		}
		return put(info, gpuInstanceInfo{Device: dev, ID: i.Id, ProfileID: i.ProfileId, Placement: i.Placement}, nvml.SUCCESS)
	})
}

//export nvmlGpuInstanceGetComputeInstanceProfileInfo
func nvmlGpuInstanceGetComputeInstanceProfileInfo(instance uintptr, profile, engProfile uint32, info unsafe.Pointer) int32 {
	return onGpuInstance("nvmlGpuInstanceGetComputeInstanceProfileInfo", instance, func(gi nvml.GpuInstance) nvml.Return {
		p, r := gi.GetComputeInstanceProfileInfo(int(profile), int(engProfile))
		return put(info, p, r)
	})
}

// nvmlGpuInstanceGetComputeInstanceProfileInfoV fills nvmlComputeInstanceProfileInfo_v2_t or _v3_t by
// the version the caller sets (without a name: the mock has none for compute instance profiles).
//
//export nvmlGpuInstanceGetComputeInstanceProfileInfoV
func nvmlGpuInstanceGetComputeInstanceProfileInfoV(instance uintptr, profile, engProfile uint32, info unsafe.Pointer) int32 {
	return onGpuInstance("nvmlGpuInstanceGetComputeInstanceProfileInfoV", instance, func(gi nvml.GpuInstance) nvml.Return {
		p, r := gi.GetComputeInstanceProfileInfo(int(profile), int(engProfile))
		if r != nvml.SUCCESS || info == nil {
			return orInvalid(r, info)
		}
		v := *(*uint32)(info)
		out := nvml.ComputeInstanceProfileInfo_v2{Version: v, Id: p.Id, SliceCount: p.SliceCount,
			InstanceCount: p.InstanceCount, MultiprocessorCount: p.MultiprocessorCount,
			SharedCopyEngineCount: p.SharedCopyEngineCount, SharedDecoderCount: p.SharedDecoderCount,
			SharedEncoderCount: p.SharedEncoderCount, SharedJpegCount: p.SharedJpegCount, SharedOfaCount: p.SharedOfaCount}
		switch version(v) {
		case 2:
			return put(info, out, nvml.SUCCESS)
		case 3:
			// _v3_t is _v2_t followed by capabilities (0 here).
			return put(info, nvml.ComputeInstanceProfileInfo_v3{Version: v, Id: out.Id, SliceCount: out.SliceCount,
				InstanceCount: out.InstanceCount, MultiprocessorCount: out.MultiprocessorCount,
				SharedCopyEngineCount: out.SharedCopyEngineCount, SharedDecoderCount: out.SharedDecoderCount,
				SharedEncoderCount: out.SharedEncoderCount, SharedJpegCount: out.SharedJpegCount,
				SharedOfaCount: out.SharedOfaCount}, nvml.SUCCESS)
		}
		return nvml.ERROR_ARGUMENT_VERSION_MISMATCH
	})
}

//export nvmlGpuInstanceGetComputeInstances
func nvmlGpuInstanceGetComputeInstances(instance uintptr, profileID uint32, instances unsafe.Pointer, count *uint32) int32 {
	return onGpuInstance("nvmlGpuInstanceGetComputeInstances", instance, func(gi nvml.GpuInstance) nvml.Return {
		cis, r := gi.GetComputeInstances(&nvml.ComputeInstanceProfileInfo{Id: profileID})
		if r != nvml.SUCCESS {
			return r
		}
		return putHandles(instances, count, cis)
	})
}

//export nvmlGpuInstanceGetComputeInstanceById
func nvmlGpuInstanceGetComputeInstanceById(instance uintptr, id uint32, out *uintptr) int32 {
	return onGpuInstance("nvmlGpuInstanceGetComputeInstanceById", instance, func(gi nvml.GpuInstance) nvml.Return {
		ci, r := gi.GetComputeInstanceById(int(id))
		if r != nvml.SUCCESS {
			return r
		}
		return putHandle(out, ci)
	})
}

func computeInstanceGetInfo(name string, instance uintptr, info unsafe.Pointer) int32 {
	return call(name, func(*mockserver.Server) nvml.Return {
		ci, r := computeInstance(instance)
		if r != nvml.SUCCESS {
			return r
		}
		i, r := ci.GetInfo()
		if r != nvml.SUCCESS {
			return r
		}
		dev, r := handles.handleOf(i.Device)
		if r != nvml.SUCCESS {
			return r
		}
		gi, r := handles.handleOf(i.GpuInstance)
		if r != nvml.SUCCESS {
			return r
		}
		return put(info, computeInstanceInfo{Device: dev, GpuInstance: gi, ID: i.Id, ProfileID: i.ProfileId, Placement: i.Placement}, nvml.SUCCESS)
	})
}

// nvmlComputeInstanceGetInfo and _v2 fill the same nvmlComputeInstanceInfo_t; go-nvml prefers _v2.
//
//export nvmlComputeInstanceGetInfo
func nvmlComputeInstanceGetInfo(instance uintptr, info unsafe.Pointer) int32 {
	return computeInstanceGetInfo("nvmlComputeInstanceGetInfo", instance, info)
}

//export nvmlComputeInstanceGetInfo_v2
func nvmlComputeInstanceGetInfo_v2(instance uintptr, info unsafe.Pointer) int32 {
	return computeInstanceGetInfo("nvmlComputeInstanceGetInfo_v2", instance, info)
}
