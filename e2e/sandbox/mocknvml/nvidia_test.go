package mocknvml_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml"
	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
)

// nvidiaPrograms builds (or finds) NVIDIA's gpu-feature-discovery and nvidia-device-plugin v0.19.0.
func nvidiaPrograms(t *testing.T) *toolchain.DevicePlugin {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	p, err := toolchain.EnsureDevicePlugin(ctx, "", testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// libraryDir is a directory holding only the library, for LD_LIBRARY_PATH: NVIDIA's programs dlopen
// "libnvidia-ml.so.1" by name (go-nvml's default; go-nvlib's info.HasNvml probes it the same way).
func libraryDir(t *testing.T, lib string) string {
	dir := t.TempDir()
	if err := os.Symlink(lib, filepath.Join(dir, toolchain.MockNVMLLibrary)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// gfd runs NVIDIA's GPU feature discovery once against the library and returns its labels.
func gfd(t *testing.T, bin, libDir string, cfg mocknvml.Config, migStrategy string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	machine := filepath.Join(dir, "product_name")
	if err := os.WriteFile(machine, []byte("NVIDIA DGX A100\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "gfd")
	env := append(writeConfig(t, cfg), "LD_LIBRARY_PATH="+libDir, "NODE_NAME=node-a")
	run(t, env, bin, "--oneshot", "--no-timestamp", "--use-node-feature-api=false",
		"--output-file="+out, "--machine-type-file="+machine, "--mig-strategy="+migStrategy)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		labels[k] = v
	}
	return labels
}

// TestGPUFeatureDiscovery runs NVIDIA's own GFD v0.19.0 against the library: its labels are what the
// config describes, which proves the ABI against NVIDIA's code rather than our reading of it.
func TestGPUFeatureDiscovery(t *testing.T) {
	libDir := libraryDir(t, library(t))
	bin := nvidiaPrograms(t).GFD
	driver := map[string]string{
		"nvidia.com/cuda.driver.major": "550", "nvidia.com/cuda.driver.minor": "54", "nvidia.com/cuda.driver.rev": "15",
		"nvidia.com/cuda.runtime.major": "12", "nvidia.com/cuda.runtime.minor": "4",
		"nvidia.com/gpu.machine": "NVIDIA-DGX-A100",
	}
	for _, tc := range []struct {
		name, strategy string
		cfg            mocknvml.Config
		want           map[string]string
	}{
		{"8xA100-40GB", "none", newConfig(t, mocknvml.A100SXM440GB, 8), map[string]string{
			"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.count": "8",
			"nvidia.com/gpu.memory": "40960", "nvidia.com/mig.capable": "true", "nvidia.com/gpu.family": "ampere",
			"nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "0",
		}},
		{"1xT4", "none", newConfig(t, mocknvml.TeslaT4, 1), map[string]string{
			"nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": "15360",
			"nvidia.com/mig.capable": "false", "nvidia.com/gpu.family": "turing",
			"nvidia.com/gpu.compute.major": "7", "nvidia.com/gpu.compute.minor": "5",
		}},
		{"2xA100 MIG mixed", "mixed", newConfig(t, mocknvml.A100SXM440GB, 2, []string{"1g.5gb", "1g.5gb", "3g.20gb"}, []string{"3g.20gb"}), map[string]string{
			"nvidia.com/mig.capable": "true", "nvidia.com/mig.strategy": "mixed",
			"nvidia.com/mig-1g.5gb.count": "2", "nvidia.com/mig-1g.5gb.memory": "4864", "nvidia.com/mig-1g.5gb.multiprocessors": "14",
			"nvidia.com/mig-3g.20gb.count": "2", "nvidia.com/mig-3g.20gb.memory": "19968", "nvidia.com/mig-3g.20gb.slices.gi": "3",
			"nvidia.com/mig-3g.20gb.product": "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb",
		}},
		{"1xH100 MIG single", "single", newConfig(t, mocknvml.H100SXM80GB, 1, []string{"1g.10gb", "1g.10gb"}), map[string]string{
			"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "nvidia.com/gpu.count": "2",
			"nvidia.com/gpu.memory": "9685", "nvidia.com/mig.strategy": "single", "nvidia.com/gpu.family": "hopper",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			labels := gfd(t, bin, libDir, tc.cfg, tc.strategy)
			for k, v := range driver {
				tc.want[k] = v
			}
			got := map[string]string{}
			for k := range tc.want {
				got[k] = labels[k]
			}
			equalJSON(t, "GFD labels", got, tc.want)
			for k, v := range labels {
				if strings.Contains(v, "INVALID") {
					t.Errorf("GFD labelled %s=%s", k, v)
				}
			}
		})
	}
}
