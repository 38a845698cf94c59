package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/internal/detect"
)

// GPU sharing (--sharing): NVIDIA's device plugin shares a GPU by advertising each one as N replicas,
// time-sliced or under MPS, as one config file of a ConfigMap says; the operator mounts the ConfigMap
// that devicePlugin.config.name names, and the plugin's config-manager picks the key the node's
// nvidia.com/device-plugin.config label names, else devicePlugin.config.default
// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing.html;
// NVIDIA/k8s-device-plugin README.md@v0.20.0, "Shared Access to GPUs").
const (
	// SharingConfigMap is the ConfigMap of device-plugin configs the operator release creates.
	SharingConfigMap = "gpuctl-device-plugin-config"
	// SharingLabel selects a node's device-plugin config (a key of SharingConfigMap).
	SharingLabel = "nvidia.com/device-plugin.config"
	// SharingSource is the values layer --sharing adds to the operator release.
	SharingSource = "--sharing"
	// SharingNone is the --sharing value that removes sharing (upgrade).
	SharingNone = "none"
)

// Sharing modes, as --sharing spells them.
const (
	SharingTimeSlicing = "time-slicing"
	SharingMPS         = "mps"
)

// SharingChoice is one --sharing value: a mode and its replicas for one pool, or ("" Pool) for every
// GPU node that names no config of its own.
type SharingChoice struct {
	Pool     string `json:"pool,omitempty"`
	Mode     string `json:"mode"`
	Replicas int    `json:"replicas"`
}

// Key is the ConfigMap key of the choice's config: its mode and replicas. A changed choice is a new
// key, so the nodes' label changes with it: NVIDIA's config-manager re-reads the config only when the
// label changes (or the plugin pod restarts), not when a ConfigMap key's content changes
// (NVIDIA/k8s-device-plugin cmd/config-manager/main.go@v0.20.0 watches the node's label).
func (c SharingChoice) Key() string { return c.Mode + "-" + strconv.Itoa(c.Replicas) }

// String is the choice as --sharing takes it.
func (c SharingChoice) String() string {
	if c.Pool == "" {
		return c.Mode + "=" + strconv.Itoa(c.Replicas)
	}
	return c.Pool + "=" + c.Mode + "=" + strconv.Itoa(c.Replicas)
}

// ParseSharing reads --sharing values: MODE=N for every GPU node, POOL=MODE=N for one pool (each at
// most once), or "none" alone (no sharing). It refuses what no cluster could take: an unknown mode,
// fewer than 1 replica (2 for MPS, which must share to mean anything; the plugin refuses fewer:
// NVIDIA/k8s-device-plugin api/config/v1/replicas.go@v0.20.0). Whether POOL exists is the plan's
// to judge. It returns nil for "none".
func ParseSharing(values []string) ([]SharingChoice, error) {
	var out []SharingChoice
	seen := map[string]bool{}
	for _, v := range values {
		if v == SharingNone {
			if len(values) > 1 {
				return nil, fmt.Errorf("%w: --sharing none removes sharing: give it alone", ErrInput)
			}
			return nil, nil
		}
		c, err := parseSharingChoice(v)
		if err != nil {
			return nil, err
		}
		if seen[c.Pool] {
			what := "pool " + c.Pool
			if c.Pool == "" {
				what = "the whole cluster"
			}
			return nil, fmt.Errorf("%w: --sharing %s: %s has a choice already; a node runs one device-plugin config (time-slicing and MPS are exclusive, NVIDIA/k8s-device-plugin#507)", ErrInput, v, what)
		}
		seen[c.Pool] = true
		out = append(out, c)
	}
	return out, nil
}

func parseSharingChoice(v string) (SharingChoice, error) {
	parts := strings.Split(v, "=")
	var c SharingChoice
	switch len(parts) {
	case 2:
	case 3:
		c.Pool, parts = parts[0], parts[1:]
		if c.Pool == "" {
			return c, fmt.Errorf("%w: --sharing %s: empty pool name", ErrInput, v)
		}
	default:
		return c, fmt.Errorf("%w: --sharing %s: want MODE=N or POOL=MODE=N (MODE time-slicing or mps), or none", ErrInput, v)
	}
	c.Mode = parts[0]
	n, err := strconv.Atoi(parts[1])
	if err != nil {
		return c, fmt.Errorf("%w: --sharing %s: replicas %q is not a number", ErrInput, v, parts[1])
	}
	c.Replicas = n
	switch {
	case c.Mode != SharingTimeSlicing && c.Mode != SharingMPS:
		return c, fmt.Errorf("%w: --sharing %s: unknown mode %q: want time-slicing or mps", ErrInput, v, c.Mode)
	case n < 2:
		// Read before the lock, so the refusal writes nothing: NVIDIA's device plugin refuses a config
		// with fewer replicas in either mode (NVIDIA/k8s-device-plugin api/config/v1/replicas.go,
		// UnmarshalJSON, v0.19.0: "number of replicas must be >= 2").
		return c, fmt.Errorf("%w: --sharing %s: %s needs at least 2 replicas: NVIDIA's device plugin exits at start with \"number of replicas must be >= 2\" (NVIDIA/k8s-device-plugin api/config/v1/replicas.go, v0.19.0)", ErrInput, v, c.Mode)
	}
	return c, nil
}

// pluginConfig is one device-plugin config file in NVIDIA's schema (NVIDIA/k8s-device-plugin
// api/config/v1/config.go and sharing.go@v0.20.0).
type pluginConfig struct {
	Version string        `json:"version"`
	Sharing pluginSharing `json:"sharing"`
}

type pluginSharing struct {
	TimeSlicing *replicatedResources `json:"timeSlicing,omitempty"`
	MPS         *replicatedResources `json:"mps,omitempty"`
}

type replicatedResources struct {
	RenameByDefault            bool                 `json:"renameByDefault"`
	FailRequestsGreaterThanOne bool                 `json:"failRequestsGreaterThanOne"`
	Resources                  []replicatedResource `json:"resources"`
}

type replicatedResource struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
}

// configFile is the choice's config file. renameByDefault is false: the replicas stay nvidia.com/gpu,
// so pods written for whole GPUs (and gpuctl verify's) run unchanged, and GPU feature discovery marks
// the node's product -SHARED for those who must tell. failRequestsGreaterThanOne is true, as NVIDIA's
// README recommends: a request for 2 replicas would not get twice the GPU, so the plugin refuses it
// rather than pretend (false is NVIDIA's default only for backwards compatibility).
func (c SharingChoice) configFile() (string, error) {
	rr := &replicatedResources{FailRequestsGreaterThanOne: true,
		Resources: []replicatedResource{{Name: detect.GPUResource, Replicas: c.Replicas}}}
	cfg := pluginConfig{Version: "v1"}
	if c.Mode == SharingMPS {
		cfg.Sharing.MPS = rr
	} else {
		cfg.Sharing.TimeSlicing = rr
	}
	b, err := yaml.Marshal(cfg)
	return string(b), err
}

// NodeLabels is the node-labels step's data: the label gpuctl sets on the nodes of the pools that
// have a --sharing choice of their own.
type NodeLabels struct {
	Key string `json:"key"`
	// Pools maps each pool with a choice to its value; Nodes each of their GPU nodes known now.
	Pools map[string]string `json:"pools,omitempty"`
	Nodes map[string]string `json:"nodes,omitempty"`
	// Rule is what happens on nodes not listed: gpuctl's own label there (from an earlier choice) goes
	// back to what it was before gpuctl's first install; a node that joins a pool later is not labelled.
	Rule string `json:"rule"`
}

// sharingRule is NodeLabels.Rule.
const sharingRule = "nodes not listed that carry the label only gpuctl wrote get its value from before gpuctl's first install back (or lose it); " +
	"a node that joins a pool later is not labelled by gpuctl: set the label in the node pool's configuration, or run gpuctl upgrade"

// sharing plans --sharing: the values layer (the ConfigMap the operator release creates, and the
// default config) and the node-labels step. It refuses a pool detection does not know, and -f or
// --set values that also choose the device plugin's config. choices nil with sharing given ("none")
// plans no config and a step that takes gpuctl's labels off.
func (b *builder) sharing() (*Layer, *Step, error) {
	if len(b.o.Sharing) == 0 {
		return nil, nil, nil
	}
	choices, err := ParseSharing(b.o.Sharing)
	if err != nil {
		return nil, nil, err
	}
	if err := b.refuseValuesAlso("--sharing writes devicePlugin.config", "devicePlugin", "config"); err != nil {
		return nil, nil, err
	}
	gpuPools := map[string][]string{}
	var poolNames []string
	for _, n := range b.det.GPUNodes {
		if _, ok := gpuPools[n.Pool]; !ok {
			poolNames = append(poolNames, n.Pool)
		}
		gpuPools[n.Pool] = append(gpuPools[n.Pool], n.Name)
	}
	slices.Sort(poolNames)
	labels := &NodeLabels{Key: SharingLabel, Rule: sharingRule}
	var layer *Layer
	if len(choices) > 0 {
		data, def := map[string]any{}, ""
		for _, c := range choices {
			if data[c.Key()], err = c.configFile(); err != nil {
				return nil, nil, err
			}
			if c.Pool == "" {
				def = c.Key()
				continue
			}
			nodes, ok := gpuPools[c.Pool]
			if !ok && !b.o.Offline {
				return nil, nil, fmt.Errorf("%w: --sharing %s: no GPU node pool %q; the GPU pools are: %s", ErrInput, c, c.Pool, orNone(poolNames))
			}
			if labels.Pools == nil {
				labels.Pools, labels.Nodes = map[string]string{}, map[string]string{}
			}
			labels.Pools[c.Pool] = c.Key()
			for _, n := range nodes {
				labels.Nodes[n] = c.Key()
			}
		}
		values := map[string]any{}
		set(values, map[string]any{"create": true, "name": SharingConfigMap, "default": def, "data": data}, "devicePlugin", "config")
		layer = &Layer{Source: SharingSource, Values: normalized(values)}
	}
	step := &Step{ID: "node-labels", Kind: KindNodeLabels, Title: "Label the shared pools' nodes " + SharingLabel,
		Why:    "NVIDIA's device plugin runs the config of ConfigMap " + SharingConfigMap + " the node's label names, else the default; MPS and time-slicing are exclusive per node (NVIDIA/k8s-device-plugin#507)",
		Labels: labels}
	if len(labels.Pools) == 0 {
		step.Why = "no pool has a --sharing choice of its own: gpuctl's labels from an earlier choice, if any, go"
	}
	return layer, step, nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none (no GPU node found)"
	}
	return strings.Join(names, ", ")
}
