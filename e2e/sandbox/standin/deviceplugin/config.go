package deviceplugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The device plugin's config file, in NVIDIA's schema (NVIDIA/k8s-device-plugin api/config/v1/config.go,
// flags.go, sharing.go and replicas.go at v0.20.0; README.md "Shared Access to GPUs"), decoded into the
// few fields the stand-in uses. The operator mounts a ConfigMap of such files, one per key, and the
// plugin's config-manager sidecar picks one by the node's label (NVIDIA/gpu-operator
// controllers/object_controls.go@v26.7.0 handleDevicePluginConfig; NVIDIA cloud-native-docs
// gpu-operator/gpu-sharing.rst).

// PluginConfig is one config file.
type PluginConfig struct {
	Version string  `json:"version"`
	Flags   Flags   `json:"flags"`
	Sharing Sharing `json:"sharing"`
}

// Flags are the config file's flags; only migStrategy matters here.
type Flags struct {
	MigStrategy *string `json:"migStrategy,omitempty"`
}

// Sharing holds at most one of the two sharing strategies.
type Sharing struct {
	TimeSlicing *ReplicatedResources `json:"timeSlicing,omitempty"`
	MPS         *ReplicatedResources `json:"mps,omitempty"`
}

// ReplicatedResources is a sharing strategy's settings.
type ReplicatedResources struct {
	RenameByDefault            bool                 `json:"renameByDefault,omitempty"`
	FailRequestsGreaterThanOne bool                 `json:"failRequestsGreaterThanOne,omitempty"`
	Resources                  []ReplicatedResource `json:"resources,omitempty"`
}

// ReplicatedResource replicates the devices of one resource.
type ReplicatedResource struct {
	Name     corev1.ResourceName `json:"name"`
	Rename   corev1.ResourceName `json:"rename,omitempty"`
	Devices  json.RawMessage     `json:"devices,omitempty"`
	Replicas int                 `json:"replicas"`
}

// Sharing strategies as GPU feature discovery labels them (nvidia.com/gpu.sharing-strategy).
const (
	StrategyNone        = "none"
	StrategyTimeSlicing = "time-slicing"
	StrategyMPS         = "mps"
)

// ConfigError is a config file the real plugin refuses to start with (it exits, and with
// failOnInitError, the operator's default, the pod crash-loops).
type ConfigError struct{ Reason string }

func (e *ConfigError) Error() string { return "device plugin config: " + e.Reason }

func configErrorf(format string, args ...any) error {
	return &ConfigError{Reason: fmt.Sprintf(format, args...)}
}

// ParseConfig reads one config file (YAML or JSON) and refuses what the real plugin refuses, where
// that is cheap to tell: another version than v1, both sharing strategies at once (exclusive since
// NVIDIA/k8s-device-plugin PR #507), fewer than one replica (two for MPS, which must actually share), a resource that is neither
// nvidia.com/gpu nor a MIG resource, and a rename outside nvidia.com/.
func ParseConfig(data []byte) (PluginConfig, error) {
	var c PluginConfig
	if err := yaml.Unmarshal(data, &c); err != nil {
		return c, configErrorf("%v", err)
	}
	if c.Version == "" {
		c.Version = "v1" // the plugin's default version
	}
	if c.Version != "v1" {
		return c, configErrorf("unknown version %q", c.Version)
	}
	if c.Flags.MigStrategy != nil {
		switch *c.Flags.MigStrategy {
		case "none", "single", "mixed":
		default:
			return c, configErrorf("unknown migStrategy %q", *c.Flags.MigStrategy)
		}
	}
	if c.Sharing.TimeSlicing != nil && c.Sharing.MPS != nil {
		return c, configErrorf("sharing: timeSlicing and mps are mutually exclusive")
	}
	strategy, rr := c.SharingStrategy()
	if rr == nil {
		return c, nil
	}
	for _, r := range rr.Resources {
		if r.Name != GPUResource && !strings.HasPrefix(string(r.Name), migResourcePrefix) {
			return c, configErrorf("%s: unsupported resource %q", strategy, r.Name)
		}
		minReplicas := 1
		if strategy == StrategyMPS {
			minReplicas = 2
		}
		if r.Replicas < minReplicas {
			return c, configErrorf("%s: %s: replicas %d, want at least %d", strategy, r.Name, r.Replicas, minReplicas)
		}
		if r.Rename != "" && strings.Contains(string(r.Rename), "/") && !strings.HasPrefix(string(r.Rename), "nvidia.com/") {
			return c, configErrorf("%s: %s: rename %q is outside nvidia.com/", strategy, r.Name, r.Rename)
		}
		if _, err := r.deviceCount(1 << 10); err != nil {
			return c, err
		}
	}
	return c, nil
}

// SharingStrategy is the config's strategy and its settings (nil for none).
func (c PluginConfig) SharingStrategy() (string, *ReplicatedResources) {
	switch {
	case c.Sharing.TimeSlicing != nil:
		return StrategyTimeSlicing, c.Sharing.TimeSlicing
	case c.Sharing.MPS != nil:
		return StrategyMPS, c.Sharing.MPS
	}
	return StrategyNone, nil
}

// sharedName is the resource the replicas are advertised as: rename (short names get the
// nvidia.com/ prefix), else <name>.shared with renameByDefault, else the name itself.
func (r ReplicatedResource) sharedName(renameByDefault bool) corev1.ResourceName {
	switch {
	case r.Rename != "" && !strings.Contains(string(r.Rename), "/"):
		return "nvidia.com/" + r.Rename
	case r.Rename != "":
		return r.Rename
	case renameByDefault:
		return r.Name + ".shared"
	}
	return r.Name
}

// deviceCount is how many of have devices the entry replicates: all of them ("all" or no devices
// field), the first N (an integer), or the listed indices. Devices named by UUID are not simulated.
func (r ReplicatedResource) deviceCount(have int) (int, error) {
	if len(r.Devices) == 0 {
		return have, nil
	}
	var all string
	if json.Unmarshal(r.Devices, &all) == nil {
		if all != "all" {
			return 0, configErrorf("%s: devices %q: want \"all\", a count or a list", r.Name, all)
		}
		return have, nil
	}
	var n int
	if json.Unmarshal(r.Devices, &n) == nil {
		if n < 1 {
			return 0, configErrorf("%s: devices %d: want at least 1", r.Name, n)
		}
		return min(n, have), nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(r.Devices, &list); err != nil {
		return 0, configErrorf("%s: devices: %v", r.Name, err)
	}
	count := 0
	for _, item := range list {
		var i int
		if err := json.Unmarshal(item, &i); err != nil {
			return 0, configErrorf("%s: devices by UUID or MIG index are not simulated in the sandbox", r.Name)
		}
		if i < have {
			count++
		}
	}
	return count, nil
}

// errNoConfig is a selection that names no config: the plugin runs with its flags only.
var errNoConfig = errors.New("no config selected")

// SelectConfig is what the plugin's config-manager does with the operator's ConfigMap (FALLBACK_STRATEGIES
// "empty", which the operator sets): the key the node's label names, else the default, else none. A
// label naming a key the ConfigMap lacks falls back the same way.
func SelectConfig(data map[string]string, label, def string) (key string, cfg PluginConfig, err error) {
	key = label
	if _, ok := data[key]; !ok || key == "" {
		key = def
	}
	doc, ok := data[key]
	if key == "" || !ok {
		return "", PluginConfig{Version: "v1"}, errNoConfig
	}
	cfg, err = ParseConfig([]byte(doc))
	return key, cfg, err
}
