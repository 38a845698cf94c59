package mockserver

import (
	"fmt"
	"maps"
	"slices"

	"github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml"
)

// profileTable is what NVML reports of a model's MIG profiles: GPU instance profiles by profile ID,
// and the compute instance profiles of each, by GPU instance profile ID and compute instance profile ID.
type profileTable struct {
	gi map[int]nvml.GpuInstanceProfileInfo
	ci map[int]map[int]nvml.ComputeInstanceProfileInfo
}

// a100MemoryMiB is the A100-SXM4-40GB's memory in dgxa100's mock (dgxa100.go: 42949672960 bytes),
// the base the other models' profile memory is scaled from.
const a100MemoryMiB = 40960

// hopperSMs and a100SMs are the multiprocessors of a full H100 SXM5 and of dgxa100's 7-slice profile
// (mig-profile.go: MultiprocessorCount 98): the H100's profiles scale dgxa100's counts by their ratio.
const hopperSMs, a100SMs = 132, 98

// profilesFor returns the model's MIG profiles. The A100-40GB's are dgxa100's (MIGProfiles in
// pkg/nvml/mock/dgxa100/mig-profile.go); every other MIG-capable model's are derived from them:
// the same profile IDs, slices and engines, memory scaled by the model's total memory, and for Hopper
// the multiprocessor counts scaled to its 132 SMs. They are not NVIDIA's measured figures for those
// boards; the profile names they give (go-nvlib's naming) are the MIG user guide's, which the tests check.
func profilesFor(m mocknvml.Model) profileTable {
	base := profileTable{gi: dgxa100.MIGProfiles.GpuInstanceProfiles, ci: dgxa100.MIGProfiles.ComputeInstanceProfiles}
	if !m.MIGCapable() {
		return profileTable{}
	}
	if m.MemoryMiB == a100MemoryMiB && m.Architecture == "Ampere" {
		return base
	}
	sm := func(n uint32) uint32 { return n }
	if m.Architecture == "Hopper" {
		sm = func(n uint32) uint32 { return (n*hopperSMs + a100SMs/2) / a100SMs }
	}
	t := profileTable{gi: map[int]nvml.GpuInstanceProfileInfo{}, ci: map[int]map[int]nvml.ComputeInstanceProfileInfo{}}
	for id, p := range base.gi {
		p.MemorySizeMB = p.MemorySizeMB * m.MemoryMiB / a100MemoryMiB
		p.MultiprocessorCount = sm(p.MultiprocessorCount)
		t.gi[id] = p
		t.ci[id] = map[int]nvml.ComputeInstanceProfileInfo{}
		for cid, c := range base.ci[id] {
			c.MultiprocessorCount = sm(c.MultiprocessorCount)
			t.ci[id][cid] = c
		}
	}
	return t
}

// migProfile is one MIG device profile a model offers: a GPU instance profile and a compute
// instance profile in it, named as go-nvlib names them.
type migProfile struct {
	name string
	gi   nvml.GpuInstanceProfileInfo
	ci   nvml.ComputeInstanceProfileInfo
}

// names lists every GPU instance / compute instance profile pair of the table by go-nvlib's name for
// it (device.NewMigProfile, which NVIDIA's device plugin and GFD use for resource and label names),
// with the shared engine profile (COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, the only one dgxa100 offers).
func (t profileTable) names(totalMiB uint64) (map[string]migProfile, error) {
	lib := device.New(nil)
	out := map[string]migProfile{}
	for _, giID := range slices.Sorted(maps.Keys(t.gi)) {
		gi := t.gi[giID]
		for _, ciID := range slices.Sorted(maps.Keys(t.ci[giID])) {
			p, err := lib.NewMigProfile(giID, ciID, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, gi.MemorySizeMB, totalMiB<<20)
			if err != nil {
				return nil, fmt.Errorf("name MIG profile %d/%d: %w", giID, ciID, err)
			}
			out[p.String()] = migProfile{name: p.String(), gi: gi, ci: t.ci[giID][ciID]}
		}
	}
	return out, nil
}

// computeProfileOfSlices is the compute instance profile ID that fills a GPU instance of n slices.
var computeProfileOfSlices = map[uint32]int{
	1: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 2: nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE,
	3: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, 4: nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE,
	6: nvml.COMPUTE_INSTANCE_PROFILE_6_SLICE, 7: nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE,
	8: nvml.COMPUTE_INSTANCE_PROFILE_8_SLICE,
}

// ProfileName is the name nvmlDeviceGetGpuInstanceProfileInfoV gives a GPU instance profile of d:
// "MIG " and go-nvlib's name of it ("MIG 1g.5gb"), or "" where go-nvlib has none.
func ProfileName(d nvml.Device, p nvml.GpuInstanceProfileInfo) string {
	mem, r := d.GetMemoryInfo()
	ci, ok := computeProfileOfSlices[p.SliceCount]
	if r != nvml.SUCCESS || !ok {
		return ""
	}
	prof, err := device.New(nil).NewMigProfile(int(p.Id), ci, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, p.MemorySizeMB, mem.Total)
	if err != nil {
		return ""
	}
	return "MIG " + prof.String()
}
