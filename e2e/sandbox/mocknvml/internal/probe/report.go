package main

import (
	"fmt"

	"github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func (p *probe) report() Report {
	var r Report
	var ret nvml.Return
	if r.DriverVersion, ret = p.nvml.SystemGetDriverVersion(); ret != nvml.SUCCESS {
		p.problem("driver version: %v", ret)
	}
	if r.NVMLVersion, ret = p.nvml.SystemGetNVMLVersion(); ret != nvml.SUCCESS {
		p.problem("NVML version: %v", ret)
	}
	if r.CUDADriverVersion, ret = p.nvml.SystemGetCudaDriverVersion_v2(); ret != nvml.SUCCESS {
		p.problem("CUDA driver version: %v", ret)
	}
	err := p.devices.VisitDevices(func(i int, d device.Device) error {
		g, err := p.gpu(d)
		r.GPUs = append(r.GPUs, g)
		return err
	})
	if err != nil {
		p.problem("visit devices: %v", err)
	}
	return r
}

// gpu reads a GPU as go-nvlib's wrapper and the device plugin read it.
func (p *probe) gpu(d device.Device) (GPU, error) {
	var g GPU
	var err error
	var ret nvml.Return
	if g.Name, ret = d.GetName(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("name: %v", ret)
	}
	if g.UUID, ret = d.GetUUID(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("uuid: %v", ret)
	}
	if g.Minor, ret = d.GetMinorNumber(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("minor: %v", ret)
	}
	mem, ret := d.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return g, fmt.Errorf("memory: %v", ret)
	}
	g.MemoryMiB = mem.Total >> 20
	for _, f := range []struct {
		dst *string
		get func() (string, error)
	}{
		{&g.PCIBusID, d.GetPCIBusID}, {&g.Architecture, d.GetArchitectureAsString},
		{&g.Brand, d.GetBrandAsString}, {&g.ComputeCapability, d.GetCudaComputeCapabilityAsString},
	} {
		if *f.dst, err = f.get(); err != nil {
			return g, err
		}
	}
	if g.MIGCapable, err = d.IsMigCapable(); err != nil {
		return g, err
	}
	if g.MIGEnabled, err = d.IsMigEnabled(); err != nil {
		return g, err
	}
	err = d.VisitMigDevices(func(j int, m device.MigDevice) error {
		mig, err := p.mig(d, m)
		g.MIGDevices = append(g.MIGDevices, mig)
		return err
	})
	return g, err
}

// mig reads a MIG device: its profile as go-nvlib names it (mig_device.go, GetProfile, which walks the
// GPU and compute instances and their profile infos), its attributes, IDs and memory.
func (p *probe) mig(parent device.Device, m device.MigDevice) (MIG, error) {
	var g MIG
	prof, err := m.GetProfile()
	if err != nil {
		return g, err
	}
	g.Profile = prof.String()
	var ret nvml.Return
	if g.UUID, ret = m.GetUUID(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("MIG uuid: %v", ret)
	}
	if g.GPUInstanceID, ret = m.GetGpuInstanceId(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("GPU instance ID: %v", ret)
	}
	if g.ComputeInstanceID, ret = m.GetComputeInstanceId(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("compute instance ID: %v", ret)
	}
	mem, ret := m.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return g, fmt.Errorf("MIG memory: %v", ret)
	}
	g.MemoryMiB = mem.Total >> 20
	attrs, ret := m.GetAttributes()
	if ret != nvml.SUCCESS {
		return g, fmt.Errorf("MIG attributes: %v", ret)
	}
	g.Multiprocessors, g.GPUSlices, g.ComputeSlices = attrs.MultiprocessorCount, attrs.GpuInstanceSliceCount, attrs.ComputeInstanceSliceCount
	info, ret := parent.GetGpuInstanceProfileInfoV(prof.GetInfo().GIProfileID).V3()
	if ret != nvml.SUCCESS {
		return g, fmt.Errorf("GPU instance profile info v3: %v", ret)
	}
	g.ProfileName = cString(info.Name[:])
	return g, p.checkInstances(parent, m, g)
}

func cString(b []uint8) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
