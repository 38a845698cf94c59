package migmanager

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// Configs are mig-parted's named MIG configs (its config file, version v1: NVIDIA/mig-parted
// api/spec/v1/spec.go at v0.15.0), decoded into the fields the stand-in uses.
type Configs struct {
	Version    string                   `json:"version"`
	MigConfigs map[string][]ConfigEntry `json:"mig-configs"`
}

// ConfigEntry is one entry of a named config: which GPUs it applies to (device-filter, devices) and
// what it makes of them.
type ConfigEntry struct {
	// DeviceFilter is one PCI device ID or a list ("0x233010DE": device 2330 of vendor 10de); none
	// matches every GPU.
	DeviceFilter json.RawMessage `json:"device-filter,omitempty"`
	// Devices is "all" or a list of GPU indices.
	Devices    json.RawMessage `json:"devices"`
	MigEnabled bool            `json:"mig-enabled"`
	MigDevices map[string]int  `json:"mig-devices,omitempty"`
}

// ParseConfigs reads a mig-parted config file. A file it cannot read (not YAML, not version v1) is an
// *ApplyError in mig-parted apply's words, which exits on it before it touches a GPU (ParseConfigFile
// in cmd/nvidia-mig-parted/assert/assert.go and (*Spec).UnmarshalJSON in api/spec/v1/spec.go of
// NVIDIA/mig-parted at v0.10.0), so MIG manager marks the node failed. mig-parted's own validation of
// the entries is not repeated here: see the package doc.
func ParseConfigs(data []byte) (Configs, error) {
	var c Configs
	if err := yaml.Unmarshal(data, &c); err != nil {
		return c, &ApplyError{Reason: fmt.Sprintf("error parsing config file: unmarshal error: %v", err)}
	}
	if c.Version == "" {
		return c, &ApplyError{Reason: "error parsing config file: unmarshal error: unable to parse with missing 'version' field"}
	}
	if c.Version != "v1" {
		return c, &ApplyError{Reason: fmt.Sprintf("error parsing config file: unmarshal error: unknown version: %v", c.Version)}
	}
	return c, nil
}

// pciDeviceID is the ID mig-parted matches device filters against: device then vendor, in hex.
func pciDeviceID(product string) string {
	return strings.ToUpper("0x" + standin.GPUModelFor(product).Device + "10de")
}

func (e ConfigEntry) matchesFilter(id string) bool {
	if len(e.DeviceFilter) == 0 {
		return true
	}
	var one string
	if json.Unmarshal(e.DeviceFilter, &one) == nil {
		return strings.EqualFold(one, id)
	}
	var list []string
	_ = json.Unmarshal(e.DeviceFilter, &list)
	return slices.ContainsFunc(list, func(s string) bool { return strings.EqualFold(s, id) })
}

func (e ConfigEntry) matchesDevice(i int) bool {
	var all string
	if json.Unmarshal(e.Devices, &all) == nil {
		return all == "all"
	}
	var list []int
	_ = json.Unmarshal(e.Devices, &list)
	return slices.Contains(list, i)
}

// ApplyError is a config the node's GPUs cannot take: mig-manager sets the state failed.
type ApplyError struct{ Reason string }

func (e *ApplyError) Error() string { return e.Reason }

// Apply is what mig-parted apply does to a node's GPUs (hw) with the named config, starting from
// the layout they have: every entry is walked in order and applied to each GPU its device filter
// and devices match (a later entry wins), as mig-parted's WalkSelectedMigConfigForEachGPU does
// (NVIDIA/mig-parted cmd/nvidia-mig-parted/util at v0.15.0); a GPU no entry matches is left alone.
// MIG on a GPU without MIG, a profile the GPU does not offer, more instances of a profile than it
// holds, or more than its seven compute slices are an *ApplyError, as NVML refuses them.
// Simplified: MIG's placement rules beyond the compute slices are not checked.
func (c Configs) Apply(name string, hw standin.Hardware, from standin.MIGLayout) (standin.MIGLayout, error) {
	entries, ok := c.MigConfigs[name]
	if !ok {
		return from, &ApplyError{Reason: fmt.Sprintf("error selecting MIG config: selected mig-config not present: %s", name)}
	}
	out := standin.MIGLayout{Config: name, GPUs: make([]map[string]int, hw.GPUs)}
	copy(out.GPUs, from.GPUs)
	id := pciDeviceID(hw.GPUProduct)
	supported := standin.MIGProfiles(hw.GPUProduct)
	for _, e := range entries {
		for i := range hw.GPUs {
			if !e.matchesFilter(id) || !e.matchesDevice(i) {
				continue
			}
			if !e.MigEnabled {
				out.GPUs[i] = nil
				continue
			}
			if supported == nil {
				return from, &ApplyError{Reason: fmt.Sprintf("GPU %d (%s) does not support MIG", i, hw.GPUProduct)}
			}
			used := 0
			devices := map[string]int{}
			for p, n := range e.MigDevices {
				most, ok := supported[p]
				if !ok {
					return from, &ApplyError{Reason: fmt.Sprintf("GPU %d (%s) has no MIG profile %s", i, hw.GPUProduct, p)}
				}
				if n > most {
					return from, &ApplyError{Reason: fmt.Sprintf("GPU %d (%s) holds at most %d of %s, not %d", i, hw.GPUProduct, most, p, n)}
				}
				used += n * standin.MIGComputeSlices(p)
				if n > 0 {
					devices[p] = n
				}
			}
			if used > 7 {
				return from, &ApplyError{Reason: fmt.Sprintf("GPU %d (%s): the MIG devices take %d compute slices of 7", i, hw.GPUProduct, used)}
			}
			out.GPUs[i] = devices
		}
	}
	return out, nil
}
