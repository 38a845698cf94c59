package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml/internal/probereport"
)

// Report, GPU and MIG are what the probe prints (package probereport, which its tests read too).
type (
	Report = probereport.Report
	GPU    = probereport.GPU
	MIG    = probereport.MIG
)

func main() {
	lib := flag.String("lib", "", "path of libnvidia-ml.so.1 (default: the loader's search)")
	rounds := flag.Int("stress", 200, "rounds of concurrent calls and garbage collection")
	flag.Parse()
	var opts []nvml.LibraryOption
	if *lib != "" {
		opts = append(opts, nvml.WithLibraryPath(*lib))
	}
	p := &probe{nvml: nvml.New(opts...)}
	if r := p.nvml.Init(); r != nvml.SUCCESS {
		log.Fatalf("nvmlInit: %v", r)
	}
	p.devices = device.New(p.nvml)
	report := p.report()
	p.checks(*rounds)
	if r := p.nvml.Shutdown(); r != nvml.SUCCESS {
		p.problem("nvmlShutdown: %v", r)
	}
	// After the last nvmlShutdown the library answers NVML_ERROR_UNINITIALIZED.
	if _, r := p.nvml.DeviceGetCount(); r != nvml.ERROR_UNINITIALIZED {
		p.problem("nvmlDeviceGetCount after nvmlShutdown: %v, want ERROR_UNINITIALIZED", r)
	}
	report.Problems = p.problems
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(report); err != nil {
		log.Fatal(err)
	}
}

type probe struct {
	nvml     nvml.Interface
	devices  device.Interface
	problems []string
}

func (p *probe) problem(format string, args ...any) {
	p.problems = append(p.problems, fmt.Sprintf(format, args...))
}
