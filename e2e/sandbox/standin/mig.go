package standin

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// MIGHardware is the MIG state of every simulated node's GPUs: what the GPUs themselves keep, where
// NVIDIA's MIG manager writes it (mig-parted through NVML) and NVIDIA's device plugin reads it (NVML's
// MIG device enumeration). It lives in the sandbox's memory, not in the API, as MIG mode lives on the
// GPU: nothing in the cluster's objects records it, so uninstall has nothing of it to take back, and
// MIG mode stays as the last config left it after the stack is gone, as on a real GPU. A node never
// partitioned has MIG mode off on every GPU, as on a fresh machine. Safe for concurrent use.
type MIGHardware struct {
	mu       sync.Mutex
	layouts  map[string]MIGLayout
	watchers []func(node string)
}

// NewMIGHardware returns the state of GPUs that were never partitioned.
func NewMIGHardware() *MIGHardware { return &MIGHardware{layouts: map[string]MIGLayout{}} }

// Layout returns node's MIG state (the zero MIGLayout: MIG off everywhere).
func (h *MIGHardware) Layout(node string) MIGLayout {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.layouts[node]
}

// Set records the MIG state node's GPUs now have and tells every watcher that it changed.
func (h *MIGHardware) Set(node string, l MIGLayout) {
	h.mu.Lock()
	h.layouts[node] = l
	watchers := slices.Clone(h.watchers)
	h.mu.Unlock()
	for _, w := range watchers {
		w(node)
	}
}

// Watch calls f with the node's name after each Set.
func (h *MIGHardware) Watch(f func(node string)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watchers = append(h.watchers, f)
}

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

// Encode is the layout as JSON, for logs.
func (l MIGLayout) Encode() string {
	b, _ := json.Marshal(l)
	return string(b)
}
