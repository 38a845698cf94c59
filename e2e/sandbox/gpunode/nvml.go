package gpunode

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// nvmlConfig is what a node's mock NVML shows: its GPUs (standin.Hardware), and on each GPU whose MIG
// mode the MIG manager turned on, its MIG devices (standin.MIGHardware), by profile in sorted order.
func nvmlConfig(node string, hw standin.Hardware, layout standin.MIGLayout) (mocknvml.Config, error) {
	cfg, err := mocknvml.NewConfig(node, hw.GPUProduct, hw.GPUs)
	if err != nil {
		return cfg, err
	}
	for i := range min(len(layout.GPUs), hw.GPUs) {
		if !layout.Enabled(i) {
			continue
		}
		var profiles []string
		for _, p := range slices.Sorted(maps.Keys(layout.GPUs[i])) {
			for range layout.GPUs[i][p] {
				profiles = append(profiles, p)
			}
		}
		if err := cfg.EnableMIG(i, profiles...); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// migMinors is the driver's /proc/driver/nvidia-caps/mig-minors for gpus GPUs: a device minor for
// the MIG config and monitor capabilities and for the access capability of every GPU instance (0 to
// 14) and compute instance (0 to 7) of each GPU, as the driver lists them whatever is partitioned
// (format: NVIDIA's MIG user guide, "Device Nodes and Capabilities"; parsed by the device plugin's
// internal/mig/mig-dp.go at v0.19.0).
func migMinors(gpus int) string {
	var b strings.Builder
	b.WriteString("config 1\nmonitor 2\n")
	minor := 3
	for g := range gpus {
		for gi := range 15 {
			fmt.Fprintf(&b, "gpu%d/gi%d/access %d\n", g, gi, minor)
			minor++
			for ci := range 8 {
				fmt.Fprintf(&b, "gpu%d/gi%d/ci%d/access %d\n", g, gi, ci, minor)
				minor++
			}
		}
	}
	return b.String()
}

// shows is what of a node's MIG layout NVML shows: each GPU's MIG mode and devices, whatever config
// they came from (a layout never set and one with MIG off everywhere show the same).
func shows(gpus int, l standin.MIGLayout) string {
	var b strings.Builder
	for i := range gpus {
		if !l.Enabled(i) {
			b.WriteString("off;")
			continue
		}
		for _, p := range slices.Sorted(maps.Keys(l.GPUs[i])) {
			fmt.Fprintf(&b, "%s=%d,", p, l.GPUs[i][p])
		}
		b.WriteString(";")
	}
	return b.String()
}
