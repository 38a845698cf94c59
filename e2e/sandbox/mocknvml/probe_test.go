package mocknvml_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml"
	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml/internal/probereport"
)

// migFacts are NVML's answers for a MIG profile: the GPU instance's memory (MiB), the compute
// instance's multiprocessors and both slice counts. The A100-40GB's are go-nvml's dgxa100 mock's
// (pkg/nvml/mock/dgxa100/mig-profile.go); the H100's are the library's derivation from them.
type migFacts struct {
	memoryMiB              uint64
	sms, gpuSlices, slices uint32
}

var facts = map[string]map[string]migFacts{
	mocknvml.A100SXM440GB: {
		"1g.5gb": {4864, 14, 1, 1}, "3g.20gb": {19968, 42, 3, 3}, "1c.3g.20gb": {19968, 14, 3, 1}, "7g.40gb": {40192, 98, 7, 7},
	},
	mocknvml.H100SXM80GB: {
		"1g.10gb": {9685, 19, 1, 1}, "3g.40gb": {39760, 57, 3, 3},
	},
}

// expect is the report the config should give: every value from the config, MIG facts from the table.
func expect(cfg mocknvml.Config) probereport.Report {
	r := probereport.Report{DriverVersion: cfg.DriverVersion, NVMLVersion: cfg.NVMLVersionOrDefault(), CUDADriverVersion: cfg.CUDADriverVersion}
	for i, g := range cfg.GPUs {
		gpu := probereport.GPU{
			Name: g.Model, UUID: g.UUID, PCIBusID: strings.ToLower(strings.TrimPrefix(g.PCIBusID, "0000")),
			Architecture: g.Architecture, Brand: "Nvidia", MemoryMiB: g.MemoryMiB, Minor: i,
			ComputeCapability: itoa(g.CudaComputeCapability.Major) + "." + itoa(g.CudaComputeCapability.Minor),
			MIGCapable:        g.MIGCapable, MIGEnabled: g.MIGEnabled,
		}
		for _, m := range g.MIGDevices {
			f := facts[g.Model][m.Profile]
			gi, _ := mocknvml.ParseProfile(m.Profile)
			gpu.MIGDevices = append(gpu.MIGDevices, probereport.MIG{
				UUID: m.UUID, Profile: m.Profile, MemoryMiB: f.memoryMiB, GPUInstanceID: m.GPUInstanceID,
				ComputeInstanceID: m.ComputeInstanceID, Multiprocessors: f.sms, GPUSlices: f.gpuSlices,
				ComputeSlices: f.slices, ProfileName: "MIG " + gi.GPUInstance,
			})
		}
		r.GPUs = append(r.GPUs, gpu)
	}
	return r
}

func itoa(i int) string { return string(rune('0' + i)) }

// TestProbe loads the library with go-nvml and go-nvlib, as NVIDIA's device plugin does, for each
// config, and requires the report the config describes and no failed check.
func TestProbe(t *testing.T) {
	lib := library(t)
	probe := goBuild(t, t.TempDir(), "github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml/internal/probe")
	for name, cfg := range map[string]mocknvml.Config{
		"8xA100-40GB, MIG off":   newConfig(t, mocknvml.A100SXM440GB, 8),
		"2xA100-40GB, MIG on":    newConfig(t, mocknvml.A100SXM440GB, 2, []string{"1g.5gb", "1g.5gb", "3g.20gb"}, []string{"3g.20gb", "1c.3g.20gb"}),
		"1xT4":                   newConfig(t, mocknvml.TeslaT4, 1),
		"1xH100, MIG on":         newConfig(t, mocknvml.H100SXM80GB, 1, []string{"3g.40gb", "1g.10gb"}),
		"2xA100, one MIG on":     newConfig(t, mocknvml.A100SXM440GB, 2, []string{"7g.40gb"}),
		"2xA100, MIG on, no MIG": newConfig(t, mocknvml.A100SXM440GB, 2, []string{}),
	} {
		t.Run(name, func(t *testing.T) {
			out := run(t, writeConfig(t, cfg), probe, "-lib", lib, "-stress", "50")
			var got probereport.Report
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("probe output: %v\n%s", err, out)
			}
			equalJSON(t, "probe report", got, expect(cfg))
		})
	}
}
