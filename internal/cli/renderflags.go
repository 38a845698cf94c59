package cli

import (
	"slices"

	"github.com/spf13/pflag"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// The render flags are every install flag that changes what an install renders: the values of its
// releases, the objects it applies, the nodes it labels. They are declared once, here: install and
// check --pre register them so the checks judge the plan the install makes, and template, export and
// images register them so what they render is the plan an install with the same flags would make
// (plan.Build, the same options). TestRenderersTakeInstallsRenderFlags keeps every verb's set alike
// and every install flag either a render flag or named as one that changes no render.

// renderFlag is one render flag: its name and how a command registers it into the options.
type renderFlag struct {
	name string
	add  func(f *pflag.FlagSet, o *engine.InstallOptions)
}

// Help texts shared with upgrade, which takes these flags with its own defaults (as recorded).
const (
	// sharingHelp is --sharing's help.
	sharingHelp = "share GPUs: MODE=N for every GPU node or POOL=MODE=N for one detected node pool (repeatable), MODE time-slicing or mps; " +
		"none (upgrade) takes it off (docs/sharing.md)"
	// migHelp is --mig's help.
	migHelp = "partition GPUs with MIG: single or mixed (the strategy; default single), CONFIG for every GPU node or POOL=CONFIG for one detected node pool " +
		"(a mig-parted config such as all-1g.10gb, all-balanced, all-disabled; repeatable); refused on GPUs without MIG; none (upgrade) takes gpuctl's labels off (docs/sharing.md)"
	// precompiledHelp is --precompiled's help.
	precompiledHelp = "auto: each GPU node's kernel gets NVIDIA's precompiled driver where the registry (or --registry) has its image, " +
		"and the driver built on the node elsewhere, through one NVIDIADriver per kernel; the plan shows each node's (docs/drivers.md)"
)

// renderFlags are the render flags but --profile, whose help each verb words for itself (template,
// export and images read no cluster with it).
func renderFlags() []renderFlag {
	return []renderFlag{
		{"values", func(f *pflag.FlagSet, o *engine.InstallOptions) {
			f.StringArrayVarP(&o.ValuesFiles, "values", "f", nil, "values file in the gpu-operator chart's keys (NFD under node-feature-discovery:); repeatable, later wins")
		}},
		{"set", func(f *pflag.FlagSet, o *engine.InstallOptions) {
			f.StringArrayVar(&o.Set, "set", nil, "set a value (Helm syntax, e.g. driver.enabled=false); repeatable, wins over -f")
		}},
		{"registry", func(f *pflag.FlagSet, o *engine.InstallOptions) {
			f.StringVar(&o.Registry, "registry", "", "pull every image from this mirror, keeping its path (nvcr.io/nvidia/gpu-operator → MIRROR/nvidia/gpu-operator); -f and --set still win. See docs/air-gap.md")
		}},
		{"image-pull-secret", func(f *pflag.FlagSet, o *engine.InstallOptions) {
			f.StringArrayVar(&o.ImagePullSecrets, "image-pull-secret", nil, "Secret in the install namespace to pull every image with (the operator, each ClusterPolicy operand, NFD); repeatable")
		}},
		{"operator-version", func(f *pflag.FlagSet, o *engine.InstallOptions) {
			f.StringVar(&o.OperatorVersion, "operator-version", "", "GPU operator release to install, with its templates, CRDs and images: v26.7.0 (default), v26.3.3 or v25.10.1")
		}},
		{"channel", func(f *pflag.FlagSet, o *engine.InstallOptions) {
			f.StringVar(&o.Channel, "channel", "", "OpenShift: the OLM channel of NVIDIA's certified operator (default: the package's default channel)")
		}},
		{"no-taint", func(f *pflag.FlagSet, o *engine.InstallOptions) {
			f.BoolVar(&o.NoTaint, "no-taint", false, "do not taint GPU nodes")
		}},
		{"taint", func(f *pflag.FlagSet, o *engine.InstallOptions) {
			f.BoolVar(&o.Taint, "taint", false, "taint GPU nodes even where gpuctl would not by default: every schedulable node is a GPU node, or nothing adds the GPU toleration to pods that request GPUs")
		}},
		{"tolerate-existing-taints", func(f *pflag.FlagSet, o *engine.InstallOptions) {
			f.BoolVar(&o.TolerateExistingTaints, "tolerate-existing-taints", false, "tolerate the GPU nodes' own NoSchedule/NoExecute taints in the NFD worker and the operands (without it, such a taint fails preflight)")
		}},
		{"monitoring", func(f *pflag.FlagSet, o *engine.InstallOptions) {
			f.BoolVar(&o.Monitoring, "monitoring", false, "turn on the DCGM exporter's and the operator's ServiceMonitors and install a Grafana dashboard and GPU alerts (needs the Prometheus Operator's CRDs, e.g. from kube-prometheus-stack; without them: a warning)")
		}},
		{"sharing", func(f *pflag.FlagSet, o *engine.InstallOptions) {
			f.StringArrayVar(&o.Sharing, "sharing", nil, sharingHelp)
		}},
		{"mig", func(f *pflag.FlagSet, o *engine.InstallOptions) {
			f.StringArrayVar(&o.MIG, "mig", nil, migHelp)
		}},
		{"precompiled", func(f *pflag.FlagSet, o *engine.InstallOptions) {
			f.StringVar(&o.Precompiled, "precompiled", "", precompiledHelp)
		}},
		{"dra", func(f *pflag.FlagSet, o *engine.InstallOptions) {
			f.BoolVar(&o.DRA, "dra", false, "allocate GPUs with Dynamic Resource Allocation: NVIDIA's DRA driver through the operator's GPUCluster instead of the ClusterPolicy and its device plugin (GPU Operator v26.7.0+, Kubernetes 1.34+)")
		}},
	}
}

// renderFlagNames are the render flags' names, --profile included.
func renderFlagNames() []string {
	names := []string{"profile"}
	for _, r := range renderFlags() {
		names = append(names, r.name)
	}
	return names
}

// addRenderFlags registers the render flags, but those named in except, with profileHelp as
// --profile's help.
func addRenderFlags(f *pflag.FlagSet, o *engine.InstallOptions, profileHelp string, except ...string) {
	f.StringVar(&o.Profile, "profile", "", profileHelp)
	for _, r := range renderFlags() {
		if !slices.Contains(except, r.name) {
			r.add(f, o)
		}
	}
}

// offlineProfileHelp is --profile's help on the verbs that render without a cluster when given one.
const offlineProfileHelp = "values profile; with it no cluster is read (the flags that need one say what they assumed)"

// validateRenderOptions judges the render flags' inputs that need no cluster: --profile, --set, -f,
// the image flags and --precompiled. The engine judges --sharing, --mig and --dra as it reads them.
func validateRenderOptions(o *engine.InstallOptions) error {
	if err := validateValuesOptions(o); err != nil {
		return err
	}
	if err := plan.CheckPrecompiled(o.Precompiled); err != nil {
		return usageError{err}
	}
	return nil
}
