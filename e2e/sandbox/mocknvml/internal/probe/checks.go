package main

import (
	"runtime"
	"sync"

	"github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// checkInstances reads the MIG device's GPU and compute instances back through the parent, which
// reads the handles inside nvmlGpuInstanceInfo_t and nvmlComputeInstanceInfo_t.
func (p *probe) checkInstances(parent device.Device, m device.MigDevice, g MIG) error {
	parentUUID, _ := parent.GetUUID()
	if d, ret := m.GetDeviceHandleFromMigDeviceHandle(); ret != nvml.SUCCESS || uuidOf(d) != parentUUID {
		p.problem("%s: parent %v, %v", g.UUID, uuidOf(d), ret)
	}
	if h, ret := p.nvml.DeviceGetHandleByUUID(g.UUID); ret != nvml.SUCCESS || uuidOf(h) != g.UUID {
		p.problem("%s: by UUID %v", g.UUID, ret)
	} else if is, ret := h.IsMigDeviceHandle(); !is || ret != nvml.SUCCESS {
		p.problem("%s: IsMigDeviceHandle %v, %v", g.UUID, is, ret)
	}
	gi, ret := parent.GetGpuInstanceById(g.GPUInstanceID)
	if ret != nvml.SUCCESS {
		p.problem("%s: GPU instance %d: %v", g.UUID, g.GPUInstanceID, ret)
		return nil
	}
	giInfo, ret := gi.GetInfo()
	if ret != nvml.SUCCESS || int(giInfo.Id) != g.GPUInstanceID || uuidOf(giInfo.Device) != parentUUID {
		p.problem("%s: GPU instance info %+v, %v", g.UUID, giInfo, ret)
	}
	profile, _ := parent.GetGpuInstanceProfileInfo(int(giInfo.ProfileId))
	if gis, ret := parent.GetGpuInstances(&profile); ret != nvml.SUCCESS || !hasGpuInstance(gis, g.GPUInstanceID) {
		p.problem("%s: GPU instances of profile %d: %d, %v", g.UUID, profile.Id, len(gis), ret)
	}
	ci, ret := gi.GetComputeInstanceById(g.ComputeInstanceID)
	if ret != nvml.SUCCESS {
		p.problem("%s: compute instance %d: %v", g.UUID, g.ComputeInstanceID, ret)
		return nil
	}
	ciInfo, ret := ci.GetInfo()
	if ret != nvml.SUCCESS || int(ciInfo.Id) != g.ComputeInstanceID || uuidOf(ciInfo.Device) != parentUUID {
		p.problem("%s: compute instance info %+v, %v", g.UUID, ciInfo, ret)
	} else if i, ret := ciInfo.GpuInstance.GetInfo(); ret != nvml.SUCCESS || int(i.Id) != g.GPUInstanceID {
		p.problem("%s: compute instance's GPU instance %+v, %v", g.UUID, i, ret)
	}
	return nil
}

func hasGpuInstance(gis []nvml.GpuInstance, id int) bool {
	for _, gi := range gis {
		if info, ret := gi.GetInfo(); ret == nvml.SUCCESS && int(info.Id) == id {
			return true
		}
	}
	return false
}

func uuidOf(d nvml.Device) string {
	if d == nil {
		return ""
	}
	u, _ := d.GetUUID()
	return u
}

// checks exercises what the report does not show.
func (p *probe) checks(rounds int) {
	n, _ := p.nvml.DeviceGetCount()
	if _, ret := p.nvml.DeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000"); ret != nvml.ERROR_NOT_FOUND {
		p.problem("unknown UUID: %v, want ERROR_NOT_FOUND", ret)
	}
	if n == 0 {
		return
	}
	first, _ := p.nvml.DeviceGetHandleByIndex(0)
	if _, ret := first.GetPowerUsage(); ret != nvml.ERROR_NOT_SUPPORTED {
		p.problem("a stubbed call (nvmlDeviceGetPowerUsage): %v, want ERROR_NOT_SUPPORTED", ret)
	}
	p.checkReinit(first)
	p.checkEvents(n)
	p.stress(n, rounds)
}

// checkReinit: nested nvmlInit and nvmlShutdown, then a full shutdown and a new nvmlInit that reads
// the config again; the device's handle stays the same.
func (p *probe) checkReinit(first nvml.Device) {
	if ret := p.nvml.Init(); ret != nvml.SUCCESS {
		p.problem("nested nvmlInit: %v", ret)
	}
	p.nvml.Shutdown()
	if ret := p.nvml.Shutdown(); ret != nvml.SUCCESS {
		p.problem("nvmlShutdown: %v", ret)
	}
	if ret := p.nvml.Init(); ret != nvml.SUCCESS {
		p.problem("nvmlInit after nvmlShutdown: %v", ret)
	}
	again, ret := p.nvml.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS || again != first {
		p.problem("device 0's handle changed across nvmlShutdown and nvmlInit (%v)", ret)
	}
}

// checkEvents does what the device plugin's health check does (internal/rm/health.go at v0.19.0).
func (p *probe) checkEvents(n int) {
	set, ret := p.nvml.EventSetCreate()
	if ret != nvml.SUCCESS {
		p.problem("event set: %v", ret)
		return
	}
	mask := uint64(nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeSingleBitEccError)
	for i := range n {
		d, _ := p.nvml.DeviceGetHandleByIndex(i)
		supported, ret := d.GetSupportedEventTypes()
		if ret != nvml.SUCCESS {
			p.problem("gpu %d: supported events: %v", i, ret)
		}
		if ret := d.RegisterEvents(mask&supported, set); ret != nvml.SUCCESS {
			p.problem("gpu %d: register events: %v", i, ret)
		}
	}
	if _, ret := set.Wait(50); ret != nvml.ERROR_TIMEOUT {
		p.problem("event wait: %v, want ERROR_TIMEOUT", ret)
	}
	if ret := set.Free(); ret != nvml.SUCCESS {
		p.problem("event set free: %v", ret)
	}
}

// stress calls the library from several goroutines at once with garbage to collect, so that both Go
// runtimes in the process collect and preempt while calls cross between them.
func (p *probe) stress(n, rounds int) {
	want := make([]string, n)
	for i := range n {
		d, _ := p.nvml.DeviceGetHandleByIndex(i)
		want[i], _ = d.GetName()
	}
	var mu sync.Mutex
	for range rounds {
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				var garbage [][]byte
				for i := range n {
					d, ret := p.nvml.DeviceGetHandleByIndex((i + w) % n)
					name, ret2 := d.GetName()
					garbage = append(garbage, make([]byte, 4096))
					if ret != nvml.SUCCESS || ret2 != nvml.SUCCESS || name != want[(i+w)%n] {
						mu.Lock()
						p.problem("stress: gpu %d: %q %v %v", (i+w)%n, name, ret, ret2)
						mu.Unlock()
					}
				}
				_ = garbage
			})
		}
		wg.Wait()
		runtime.GC()
	}
}
