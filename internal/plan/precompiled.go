package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuctl/gpuctl/internal/distro"
	"github.com/gpuctl/gpuctl/internal/driverimage"
)

// --precompiled auto: NVIDIA publishes precompiled driver images for some kernels only
// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/precompiled-drivers.html). The
// plan gives each GPU node's kernel the precompiled driver where the registry has its image and the
// compiled one elsewhere, through NVIDIADriver objects: NVIDIA's controller runs several as long as no
// node is selected by two (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-driver-configuration.html;
// internal/validator/validator.go at v26.7.0). Our chart renders one NVIDIADriver per entry of
// driver.nvidiaDriverCRD.kernelDrivers, selecting NFD's kernel-version.full label.
const (
	// PrecompiledAuto is the --precompiled value that chooses per kernel.
	PrecompiledAuto = "auto"
	// PrecompiledSource is the values layer --precompiled adds to the operator release.
	PrecompiledSource = "--precompiled auto"
	// KernelLabel is NFD's label of a node's full kernel release, which NVIDIA's controller selects
	// precompiled drivers' nodes by (internal/state/nodepool.go at v26.7.0).
	KernelLabel = "feature.node.kubernetes.io/kernel-version.full"
	// defaultDriverMinOperator is the first release whose NVIDIADriver can be the default, the one for
	// every GPU node no other NVIDIADriver selects (spec.default, new in v26.7.0).
	defaultDriverMinOperator = "26.7"
)

// PrecompiledFacts are what the registry holds for the GPU nodes' kernels: the engine asks it before
// planning --precompiled auto (the plan itself reads nothing).
type PrecompiledFacts struct {
	// Repository is the driver image's repository asked ("nvcr.io/nvidia/driver").
	Repository string `json:"repository"`
	// Branch is the driver branch precompiled images are tagged by ("580").
	Branch string `json:"branch"`
	// Kernels are the GPU nodes by kernel and OS image.
	Kernels []KernelImage `json:"kernels"`
	// Unknown says why what the registry holds is not known (unreachable, no such repository, not
	// asked): then every GPU node builds its driver.
	Unknown string `json:"unknown,omitempty"`
}

// KernelImage is the precompiled image of the GPU nodes with one kernel and OS image.
type KernelImage struct {
	// Kernel is status.nodeInfo.kernelVersion (uname -r).
	Kernel  string   `json:"kernel"`
	OSImage string   `json:"osImage"`
	Nodes   []string `json:"nodes"`
	// Tag is the precompiled image's tag; "" for an OS NVIDIA tags no precompiled image for.
	Tag string `json:"tag,omitempty"`
	// Published is true when the registry lists Tag.
	Published bool `json:"published"`
}

// NodeDriver is the driver a GPU node gets, as the plan shows it.
type NodeDriver struct {
	Node   string `json:"node"`
	Kernel string `json:"kernel"`
	// Driver is the NVIDIADriver that selects the node.
	Driver      string `json:"driver"`
	Precompiled bool   `json:"precompiled"`
	// Image is the precompiled image; empty for a compiled driver.
	Image string `json:"image,omitempty"`
	// Why the node gets a compiled driver.
	Why string `json:"why,omitempty"`
}

// PrecompiledError is a --precompiled the plan refuses; it is an ErrInput.
type PrecompiledError struct{ Reason string }

func (e *PrecompiledError) Error() string {
	return "--precompiled " + PrecompiledAuto + ": " + e.Reason
}

// Unwrap makes a PrecompiledError an ErrInput.
func (e *PrecompiledError) Unwrap() error { return ErrInput }

// CheckPrecompiled judges a --precompiled value alone (the CLI's check, before any cluster is read).
func CheckPrecompiled(v string) error {
	if v != "" && v != PrecompiledAuto {
		return fmt.Errorf("%w: --precompiled %s: the one value is auto (precompiled where the registry has the image for the node's kernel, compiled elsewhere); set driver.usePrecompiled for all or none", ErrInput, v)
	}
	return nil
}

// KernelDriverName is the name our chart gives a kernelDrivers entry's NVIDIADriver
// (templates/nvidiadriver.yaml): "kernel-" and the kernel lowercased, each run of characters a name
// may not hold made one "-", cut at 63 characters, without trailing "-" and "." (a name ends with a
// letter or digit).
func KernelDriverName(label string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(label) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '.' || r == '-' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	name := "kernel-" + b.String()
	if len(name) > 63 {
		name = name[:63]
	}
	return strings.TrimRight(name, "-.")
}

// refusePrecompiled judges --precompiled before anything is planned: its value, and the OLM path.
func (b *builder) refusePrecompiled() error {
	if err := CheckPrecompiled(b.o.Precompiled); err != nil || b.o.Precompiled == "" {
		return err
	}
	if why := distro.Get(b.p.Distribution).NoPrecompiledDriver; why != "" {
		return &PrecompiledError{why + ": drop --precompiled"}
	}
	return nil
}

// precompiled is the --precompiled auto layer: the driver handed to NVIDIADrivers, one per kernel the
// registry has the precompiled image of, and the compiled default for every other GPU node (from
// v26.7; older releases have no default NVIDIADriver, so each kernel gets one, compiled where no
// image exists). It also sets the plan's Drivers, and warns where it cannot choose.
func (b *builder) precompiled() (*Layer, error) {
	if b.o.Precompiled == "" {
		return nil, nil
	}
	for _, path := range [][]string{{"driver", "usePrecompiled"}, {"driver", "nvidiaDriverCRD", "kernelDrivers"}, {"driver", "nvidiaDriverCRD", "nodeSelector"}} {
		if err := b.refuseValuesAlso("--precompiled auto writes "+strings.Join(path, "."), path...); err != nil {
			return nil, err
		}
	}
	f := b.in.Precompiled
	if f == nil {
		f = &PrecompiledFacts{Unknown: "the registry was not asked"}
	}
	withDefault := since(b.in.Charts[OperatorRelease].AppVersion, defaultDriverMinOperator)
	kernels := groupKernels(f)
	var entries []any
	for _, k := range kernels {
		switch {
		case k.published:
			entries = append(entries, map[string]any{"kernel": k.label, "usePrecompiled": true, "version": f.Branch})
		case !withDefault:
			entries = append(entries, map[string]any{"kernel": k.label, "usePrecompiled": false})
		}
	}
	// With no entry (nothing known, or an older release and no GPU node yet) NVIDIADriver "default"
	// drives every GPU node, compiled.
	deployDefault := withDefault || len(entries) == 0
	b.p.Drivers = nodeDrivers(f, kernels, deployDefault)
	switch {
	case f.Unknown != "":
		b.warn(PrecompiledSource + ": " + f.Unknown + ": every GPU node builds its driver (compiled); run again when the registry answers")
	case len(kernels) == 0:
		b.warn(PrecompiledSource + ": no GPU node known yet: every GPU node builds its driver (compiled) until gpuctl upgrade plans again")
	case !withDefault:
		b.warn(PrecompiledSource + ": GPU Operator " + b.in.Charts[OperatorRelease].AppVersion + " has no default NVIDIADriver (v26.7 added it): a GPU node that joins later with another kernel gets no driver until gpuctl upgrade plans again")
	}
	values := map[string]any{"driver": map[string]any{
		"usePrecompiled":  false,
		"nvidiaDriverCRD": map[string]any{"enabled": true, "deployDefaultCR": deployDefault, "kernelDrivers": entries},
	}}
	if entries == nil {
		values["driver"].(map[string]any)["nvidiaDriverCRD"].(map[string]any)["kernelDrivers"] = []any{}
	}
	return &Layer{Source: PrecompiledSource, Values: normalized(values)}, nil
}

// kernelGroup is the GPU nodes with one kernel (as NFD labels it): precompiled only if the image of
// each of their OS images is published.
type kernelGroup struct {
	label     string
	published bool
	images    []KernelImage
}

func groupKernels(f *PrecompiledFacts) []kernelGroup {
	byLabel := map[string]*kernelGroup{}
	var order []string
	for _, k := range f.Kernels {
		label := driverimage.KernelLabel(k.Kernel)
		if label == "" {
			continue
		}
		g, ok := byLabel[label]
		if !ok {
			g = &kernelGroup{label: label, published: f.Unknown == ""}
			byLabel[label] = g
			order = append(order, label)
		}
		g.published = g.published && k.Published && k.Tag != ""
		g.images = append(g.images, k)
	}
	slices.Sort(order)
	out := make([]kernelGroup, 0, len(order))
	for _, l := range order {
		out = append(out, *byLabel[l])
	}
	return out
}

// nodeDrivers are the plan's Drivers: each GPU node with the NVIDIADriver that selects it, sorted by node.
func nodeDrivers(f *PrecompiledFacts, kernels []kernelGroup, deployDefault bool) []NodeDriver {
	var out []NodeDriver
	for _, g := range kernels {
		for _, k := range g.images {
			for _, n := range k.Nodes {
				d := NodeDriver{Node: n, Kernel: k.Kernel, Driver: "NVIDIADriver " + KernelDriverName(g.label)}
				switch {
				case g.published:
					d.Precompiled, d.Image = true, f.Repository+":"+k.Tag
				default:
					if deployDefault {
						d.Driver = "NVIDIADriver default"
					}
					d.Why = compiledWhy(f, g, k)
				}
				out = append(out, d)
			}
		}
	}
	slices.SortFunc(out, func(a, b NodeDriver) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// compiledWhy is why a node of kernel group g (image k) builds its driver.
func compiledWhy(f *PrecompiledFacts, g kernelGroup, k KernelImage) string {
	switch {
	case f.Unknown != "":
		return f.Unknown
	case k.Tag == "":
		return "no precompiled image for " + orUnknownOS(k.OSImage) + " (NVIDIA publishes them for Ubuntu)"
	case !k.Published:
		return "no " + f.Repository + ":" + k.Tag
	}
	// This OS image has one, another with the same kernel has none: one NVIDIADriver selects them all.
	for _, other := range g.images {
		if !other.Published {
			return "no " + f.Repository + ":" + other.Tag + " for " + orUnknownOS(other.OSImage) + " nodes of the same kernel"
		}
	}
	return ""
}

func orUnknownOS(s string) string {
	if s == "" {
		return "an unknown OS"
	}
	return s
}
