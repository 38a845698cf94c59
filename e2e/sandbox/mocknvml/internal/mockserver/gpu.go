package mockserver

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml"
)

// maxMIGDevices is what nvmlDeviceGetMaxMigDeviceCount reports on a MIG-capable GPU: seven, one per
// compute slice.
const maxMIGDevices = 7

// GPU is one physical GPU: dgxa100's mock device with its fields and functions set from the config.
type GPU struct {
	*dgxa100.Device
	cfg      mocknvml.GPU
	profiles profileTable
	migs     []*MigDevice
}

// architectures maps go-nvlib's architecture names back to NVML's (device.go, GetArchitectureAsString).
var architectures = map[string]nvml.DeviceArchitecture{
	"Kepler": nvml.DEVICE_ARCH_KEPLER, "Maxwell": nvml.DEVICE_ARCH_MAXWELL, "Pascal": nvml.DEVICE_ARCH_PASCAL,
	"Volta": nvml.DEVICE_ARCH_VOLTA, "Turing": nvml.DEVICE_ARCH_TURING, "Ampere": nvml.DEVICE_ARCH_AMPERE,
	"Ada Lovelace": nvml.DEVICE_ARCH_ADA, "Hopper": nvml.DEVICE_ARCH_HOPPER, "Blackwell": nvml.DEVICE_ARCH_BLACKWELL,
}

func newGPU(index int, c mocknvml.GPU) (*GPU, error) {
	arch, ok := architectures[c.Architecture]
	if !ok {
		arch = nvml.DEVICE_ARCH_UNKNOWN
	}
	d := dgxa100.NewDevice(index)
	d.UUID, d.Name, d.PciBusID = c.UUID, c.Model, c.PCIBusID
	d.Architecture = arch
	d.CudaComputeCapability = dgxa100.CudaComputeCapability{Major: c.CudaComputeCapability.Major, Minor: c.CudaComputeCapability.Minor}
	total := c.MemoryMiB << 20
	d.MemoryInfo = nvml.Memory{Total: total, Free: total}
	if c.MIGEnabled {
		d.MigMode = nvml.DEVICE_MIG_ENABLE
	}
	g := &GPU{Device: d, cfg: c}
	if c.MIGCapable {
		model, known := mocknvml.LookupModel(c.Model)
		if !known {
			return nil, fmt.Errorf("MIG capable %q: the mock has MIG profiles only for known models", c.Model)
		}
		g.profiles = profilesFor(model)
	}
	g.setFuncs()
	if err := g.addMIGDevices(); err != nil {
		return nil, err
	}
	return g, nil
}

func (g *GPU) setFuncs() {
	d := g.Device
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{Total: d.MemoryInfo.Total, Free: d.MemoryInfo.Free, Used: d.MemoryInfo.Used}, nvml.SUCCESS
	}
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return g.pciInfo() }
	d.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return false, nvml.SUCCESS }
	// The event types NVIDIA's device plugin registers for its health check
	// (internal/rm/health.go at v0.19.0); the mock never delivers any.
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
		return nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
	}
	d.GetTopologyCommonAncestorFunc = g.topologyCommonAncestor
	if !g.cfg.MIGCapable {
		notSupported := func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
		d.GetMigModeFunc = notSupported
		d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		d.GetGpuInstanceProfileInfoFunc = func(int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
			return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
		}
		return
	}
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return maxMIGDevices, nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = g.migDeviceByIndex
	d.GetGpuInstanceProfileInfoFunc = g.gpuInstanceProfileInfo
	d.GetGpuInstancesFunc = g.gpuInstances
	d.GetGpuInstanceByIdFunc = g.gpuInstanceByID
}

// pciInfo fills nvmlPciInfo_t from the bus ID "dddddddd:bb:dd.f".
func (g *GPU) pciInfo() (nvml.PciInfo, nvml.Return) {
	var p nvml.PciInfo
	fields := strings.FieldsFunc(g.cfg.PCIBusID, func(r rune) bool { return r == ':' || r == '.' })
	if len(fields) != 4 {
		return p, nvml.ERROR_UNKNOWN
	}
	parse := func(s string) uint32 { v, _ := strconv.ParseUint(s, 16, 32); return uint32(v) }
	p.Domain, p.Bus, p.Device = parse(fields[0]), parse(fields[1]), parse(fields[2])
	p.PciDeviceId = g.cfg.PCIDeviceID
	busID := strings.ToUpper(g.cfg.PCIBusID)
	copy(p.BusId[:len(p.BusId)-1], busID)
	legacy := fmt.Sprintf("%04X:%02X:%02X.0", p.Domain, p.Bus, p.Device)
	copy(p.BusIdLegacy[:len(p.BusIdLegacy)-1], legacy)
	return p, nvml.SUCCESS
}

// topologyCommonAncestor answers go-gpuallocator, whose preferred allocation (NVIDIA's device plugin,
// GetPreferredAllocation) fails without it (internal/links/device.go at v0.6.0, GetP2PLink). The mock
// has no PCIe tree: a GPU and itself share the board (NVML_TOPOLOGY_INTERNAL), any two GPUs of the
// node its NUMA node (NVML_TOPOLOGY_NODE).
func (g *GPU) topologyCommonAncestor(other nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
	uuid, r := other.GetUUID()
	switch {
	case r != nvml.SUCCESS:
		return 0, nvml.ERROR_INVALID_ARGUMENT
	case uuid == g.UUID:
		return nvml.TOPOLOGY_INTERNAL, nvml.SUCCESS
	}
	return nvml.TOPOLOGY_NODE, nvml.SUCCESS
}

func (g *GPU) migDeviceByIndex(i int) (nvml.Device, nvml.Return) {
	switch {
	case i < 0 || i >= maxMIGDevices:
		return nil, nvml.ERROR_INVALID_ARGUMENT
	case i >= len(g.migs):
		return nil, nvml.ERROR_NOT_FOUND
	}
	return g.migs[i], nvml.SUCCESS
}

// gpuInstanceProfileInfo answers like dgxa100's mock (dgxa100.go, GetGpuInstanceProfileInfoFunc), from
// the model's table.
func (g *GPU) gpuInstanceProfileInfo(id int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
	if id < 0 || id >= nvml.GPU_INSTANCE_PROFILE_COUNT {
		return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	p, ok := g.profiles.gi[id]
	if !ok {
		return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
	}
	return p, nvml.SUCCESS
}

// gpuInstances lists the GPU's instances of a profile in ID order (dgxa100's walks a map).
func (g *GPU) gpuInstances(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
	if info == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	var out []nvml.GpuInstance
	for _, m := range g.migs {
		if m.gi.Info.ProfileId == info.Id {
			out = append(out, m.gi)
		}
	}
	return out, nvml.SUCCESS
}

func (g *GPU) gpuInstanceByID(id int) (nvml.GpuInstance, nvml.Return) {
	i := slices.IndexFunc(g.migs, func(m *MigDevice) bool { return int(m.gi.Info.Id) == id })
	if i < 0 {
		return nil, nvml.ERROR_NOT_FOUND
	}
	return g.migs[i].gi, nvml.SUCCESS
}

// MIGDevices are the GPU's MIG devices in the config's order.
func (g *GPU) MIGDevices() []*MigDevice { return g.migs }
