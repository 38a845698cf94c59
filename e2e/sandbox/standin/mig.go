package standin

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// MIGProfiles returns the GPU instance profiles a GPU product can be partitioned into, each with the
// most instances of it one GPU holds; nil for a GPU without MIG (T4, L4, L40S, A10G, RTX A6000, and a
// vGPU guest's A100-40C, whose partitioning is the host's). Source: NVIDIA's MIG user guide, "Supported
// MIG Profiles" (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/): A100-SXM4-40GB,
// A100-80GB and H100-80GB (SXM5).
func MIGProfiles(product string) map[string]int {
	switch product {
	case GPUA100SXM40:
		return map[string]int{"1g.5gb": 7, "1g.5gb+me": 1, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1}
	case GPUA100PCIe80, GPUH100SXM80:
		return map[string]int{"1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1}
	}
	return nil
}

// MIGComputeSlices is how many of a GPU's seven compute slices a profile ("3g.40gb", "1g.10gb+me")
// takes: the number before the g.
func MIGComputeSlices(profile string) int {
	n, err := strconv.Atoi(strings.SplitN(profile, "g", 2)[0])
	if err != nil {
		return 0
	}
	return n
}

// MIGLayoutAnnotation is the sandbox's own node annotation where the mig-manager stand-in records the
// MIG devices it applied (a MIGLayout as JSON) and the device-plugin stand-in reads them, as the real
// device plugin enumerates MIG devices through NVML. No annotation: MIG mode is off on every GPU, as on
// a fresh machine.
const MIGLayoutAnnotation = "sandbox.gpuctl.dev/mig-layout"

// MIGLayout is the MIG state of a node's GPUs, one entry per GPU by index: nil or empty when MIG mode
// is off, else the MIG devices by profile ("1g.10gb": 7). Config is the mig-parted config it came from.
type MIGLayout struct {
	Config string           `json:"config"`
	GPUs   []map[string]int `json:"gpus"`
}

// Enabled reports whether GPU i has MIG mode on.
func (l MIGLayout) Enabled(i int) bool { return i < len(l.GPUs) && l.GPUs[i] != nil }

// Profiles lists the MIG profiles present on any GPU, sorted.
func (l MIGLayout) Profiles() []string {
	set := map[string]bool{}
	for _, g := range l.GPUs {
		for p, n := range g {
			if n > 0 {
				set[p] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// Encode is the annotation's value.
func (l MIGLayout) Encode() string {
	b, _ := json.Marshal(l)
	return string(b)
}

// DecodeMIGLayout reads the annotation; "" is every GPU with MIG off.
func DecodeMIGLayout(s string) (MIGLayout, error) {
	var l MIGLayout
	if s == "" {
		return l, nil
	}
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		return l, fmt.Errorf("annotation %s: %w", MIGLayoutAnnotation, err)
	}
	return l, nil
}
