package mockserver

import (
	"fmt"
	"maps"
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml"
)

// MigDevice is a MIG device handle (what nvmlDeviceGetMigDeviceHandleByIndex returns): a GPU instance
// of dgxa100's mock with one compute instance, which dgxa100's mock has no handle for.
type MigDevice struct {
	mock.Device
	parent  *GPU
	index   int
	cfg     mocknvml.MIGDevice
	profile migProfile
	gi      *dgxa100.GpuInstance
	ci      *dgxa100.ComputeInstance
}

// addMIGDevices creates the configured GPU and compute instances, each on the compute slices after
// the previous one's.
func (g *GPU) addMIGDevices() error {
	if len(g.cfg.MIGDevices) == 0 {
		return nil
	}
	byName, err := g.profiles.names(g.cfg.MemoryMiB)
	if err != nil {
		return err
	}
	start := uint32(0)
	for i, c := range g.cfg.MIGDevices {
		p, ok := byName[c.Profile]
		if !ok {
			return fmt.Errorf("MIG profile %q is not one of %s's (%v)", c.Profile, g.cfg.Model, slices.Sorted(maps.Keys(byName)))
		}
		m := g.newMigDevice(i, c, p, start)
		start += p.gi.SliceCount
		g.migs = append(g.migs, m)
	}
	return nil
}

func (g *GPU) newMigDevice(i int, c mocknvml.MIGDevice, p migProfile, start uint32) *MigDevice {
	d := g.Device
	gi := dgxa100.NewGpuInstance(nvml.GpuInstanceInfo{
		Device: d, Id: uint32(c.GPUInstanceID), ProfileId: p.gi.Id,
		Placement: nvml.GpuInstancePlacement{Start: start, Size: p.gi.SliceCount},
	})
	ci := dgxa100.NewComputeInstance(nvml.ComputeInstanceInfo{
		Device: d, GpuInstance: gi, Id: uint32(c.ComputeInstanceID), ProfileId: p.ci.Id,
		Placement: nvml.ComputeInstancePlacement{Start: 0, Size: p.ci.SliceCount},
	})
	gi.ComputeInstances[ci] = struct{}{}
	gi.ComputeInstanceCounter = uint32(c.ComputeInstanceID) + 1
	d.GpuInstances[gi] = struct{}{}
	d.GpuInstanceCounter = max(d.GpuInstanceCounter, uint32(c.GPUInstanceID)+1)
	m := &MigDevice{parent: g, index: i, cfg: c, profile: p, gi: gi, ci: ci}
	m.setInstanceFuncs()
	m.setFuncs()
	return m
}

// setInstanceFuncs answers from the model's table where dgxa100's mock reads its global A100-40GB one,
// and adds the lookups by ID it lacks.
func (m *MigDevice) setInstanceFuncs() {
	table, gi, ci := m.parent.profiles, m.gi, m.ci
	gi.GetComputeInstanceProfileInfoFunc = func(id, eng int) (nvml.ComputeInstanceProfileInfo, nvml.Return) {
		if id < 0 || id >= nvml.COMPUTE_INSTANCE_PROFILE_COUNT {
			return nvml.ComputeInstanceProfileInfo{}, nvml.ERROR_INVALID_ARGUMENT
		}
		p, ok := table.ci[int(gi.Info.ProfileId)][id]
		if !ok || eng != nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED {
			return nvml.ComputeInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
		}
		return p, nvml.SUCCESS
	}
	gi.GetComputeInstanceByIdFunc = func(id int) (nvml.ComputeInstance, nvml.Return) {
		if int(ci.Info.Id) != id {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return ci, nvml.SUCCESS
	}
	gi.GetComputeInstancesFunc = func(info *nvml.ComputeInstanceProfileInfo) ([]nvml.ComputeInstance, nvml.Return) {
		if info == nil {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		if info.Id != ci.Info.ProfileId {
			return nil, nvml.SUCCESS
		}
		return []nvml.ComputeInstance{ci}, nvml.SUCCESS
	}
}

func (m *MigDevice) setFuncs() {
	parent := m.parent.Device
	memory := m.profile.gi.MemorySizeMB << 20
	m.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return true, nvml.SUCCESS }
	m.GetDeviceHandleFromMigDeviceHandleFunc = func() (nvml.Device, nvml.Return) { return parent, nvml.SUCCESS }
	m.GetGpuInstanceIdFunc = func() (int, nvml.Return) { return m.cfg.GPUInstanceID, nvml.SUCCESS }
	m.GetComputeInstanceIdFunc = func() (int, nvml.Return) { return m.cfg.ComputeInstanceID, nvml.SUCCESS }
	m.GetUUIDFunc = func() (string, nvml.Return) { return m.cfg.UUID, nvml.SUCCESS }
	// NVML names a MIG device after its GPU and profile ("NVIDIA A100-SXM4-40GB MIG 1g.5gb").
	m.GetNameFunc = func() (string, nvml.Return) { return parent.Name + " MIG " + m.cfg.Profile, nvml.SUCCESS }
	m.GetIndexFunc = func() (int, nvml.Return) { return m.index, nvml.SUCCESS }
	m.GetArchitectureFunc = parent.GetArchitectureFunc
	m.GetBrandFunc = parent.GetBrandFunc
	m.GetCudaComputeCapabilityFunc = parent.GetCudaComputeCapabilityFunc
	m.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: memory, Free: memory}, nvml.SUCCESS }
	m.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{Total: memory, Free: memory}, nvml.SUCCESS
	}
	m.GetAttributesFunc = func() (nvml.DeviceAttributes, nvml.Return) { return m.attributes(), nvml.SUCCESS }
}

// attributes are what nvmlDeviceGetAttributes_v2 reports of a MIG device: its compute instance's
// multiprocessors and shared engines, both instances' slices and the GPU instance's memory.
func (m *MigDevice) attributes() nvml.DeviceAttributes {
	gi, ci := m.profile.gi, m.profile.ci
	return nvml.DeviceAttributes{
		MultiprocessorCount:       ci.MultiprocessorCount,
		SharedCopyEngineCount:     ci.SharedCopyEngineCount,
		SharedDecoderCount:        ci.SharedDecoderCount,
		SharedEncoderCount:        ci.SharedEncoderCount,
		SharedJpegCount:           ci.SharedJpegCount,
		SharedOfaCount:            ci.SharedOfaCount,
		GpuInstanceSliceCount:     gi.SliceCount,
		ComputeInstanceSliceCount: ci.SliceCount,
		MemorySizeMB:              gi.MemorySizeMB,
	}
}

// Parent is the GPU the MIG device is on.
func (m *MigDevice) Parent() *GPU { return m.parent }

// GpuInstance and ComputeInstance are the MIG device's instances.
func (m *MigDevice) GpuInstance() *dgxa100.GpuInstance         { return m.gi }
func (m *MigDevice) ComputeInstance() *dgxa100.ComputeInstance { return m.ci }

// UUID is the MIG device's UUID.
func (m *MigDevice) UUID() string { return m.cfg.UUID }
