package wizard

import (
	"slices"
	"strings"

	"charm.land/bubbles/v2/textinput"
	"charm.land/lipgloss/v2"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/distro"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/profile"
)

// Field IDs of the choices screen.
const (
	fieldProfile  = "profile"
	fieldOperator = "operator"
	fieldTaint    = "taint"
	fieldDriver   = "driver"
	fieldMIG      = "mig"
	fieldSharing  = "sharing"
	fieldGPUs     = "gpus"
	fieldNLS      = "nls-token"
	fieldGridd    = "gridd-conf"
	fieldNGC      = "ngc-key"
)

type fieldKind int

const (
	kindSelect fieldKind = iota
	kindFile
	kindSecret
)

type option struct{ value, label string }

// field is one question: a choice among options, a file path, or a masked secret.
type field struct {
	id, label string
	// help is the one-line explanation under the question.
	help    string
	kind    fieldKind
	options []option
	sel     int
	input   textinput.Model
}

func (f *field) value() string {
	if f.kind != kindSelect {
		return strings.TrimSpace(f.input.Value())
	}
	if len(f.options) == 0 {
		return ""
	}
	return f.options[f.sel].value
}

func (f *field) selectValue(v string) {
	for i, o := range f.options {
		if o.value == v {
			f.sel = i
		}
	}
}

// Driver choices.
const (
	driverContainer = "container"
	// driverPrecompiled is the driver container with --precompiled auto.
	driverPrecompiled = "precompiled-auto"
	driverHost        = "pre-installed"
	driverPlatform    = "platform"
)

// The taint field's answers.
const (
	taintAuto = "auto"
	taintYes  = "yes"
	taintNo   = "no"
)

// taintChoice is the taint answer the flags already gave.
func taintChoice(o engine.InstallOptions) string {
	switch {
	case o.NoTaint:
		return taintNo
	case o.Taint:
		return taintYes
	}
	return taintAuto
}

// The GPU allocation field's answers.
const (
	gpusDevicePlugin = "device-plugin"
	gpusDRA          = "dra"
)

// choices is what the person chose, as the values the options are made from.
type choices struct {
	Profile, Operator, Driver, MIG string
	// Sharing is a --sharing value for every GPU node ("" none); GPUs is gpusDevicePlugin or gpusDRA.
	Sharing, GPUs string
	// Taint is taintAuto (gpuctl decides, as install does without --taint or --no-taint), taintYes
	// (--taint) or taintNo (--no-taint).
	Taint                       string
	NLSTokenFile, GriddConfFile string
	// NGCKey is the typed NGC API key: handed to the engine, never saved or shown.
	NGCKey string
}

// chartMIGStrategy is the gpu-operator chart's default mig.strategy (charts/gpu-operator/values.yaml).
const chartMIGStrategy = "single"

// profileDriver says who provides the driver under a profile: the driver container (the person may
// say the hosts have one instead), or the platform (the profile disables the driver container).
func profileDriver(p profile.Profile) string {
	d, _ := p.Values["driver"].(map[string]any)
	if enabled, ok := d["enabled"].(bool); ok && !enabled {
		return driverPlatform
	}
	return driverContainer
}

// profileLicensing says whether a profile's values use the NVIDIA AI Enterprise Secrets.
func profileLicensing(p profile.Profile) bool {
	d, _ := p.Values["driver"].(map[string]any)
	lc, _ := d["licensingConfig"].(map[string]any)
	return lc["secretName"] != nil
}

// vGPU profiles run NVIDIA's vGPU guest driver in the driver container; a host driver is not an option.
func profileVGPU(p profile.Profile) bool { return profileLicensing(p) }

// buildFields returns the questions for the chosen profile, keeping earlier answers by ID.
func buildFields(st styles, profiles []profile.Profile, bundles []bundle.Bundle, detected string, c choices, old []field) []field {
	chosen := profiles[0]
	for _, p := range profiles {
		if p.Name == c.Profile {
			chosen = p
		}
	}
	fs := []field{profileField(profiles, detected), operatorField(bundles), taintField(), driverField(chosen), migField(), sharingField(), gpusField()}
	for i, v := range []string{c.Profile, c.Operator, c.Taint, c.Driver, c.MIG, c.Sharing, c.GPUs} {
		fs[i].selectValue(v)
	}
	if profileLicensing(chosen) {
		fs = append(fs, licensingFields(st, c, old)...)
	}
	return fs
}

func profileField(profiles []profile.Profile, detected string) field {
	po := make([]option, 0, len(profiles))
	for _, p := range profiles {
		label := p.Name
		if p.Name == detected {
			label += " (detected)"
		}
		po = append(po, option{p.Name, label})
	}
	return field{id: fieldProfile, label: "Profile", kind: kindSelect, options: po,
		help: "the values for your platform (runtime paths, who brings the driver); detected: " + detected}
}

func operatorField(bundles []bundle.Bundle) field {
	bo := make([]option, 0, len(bundles))
	for _, b := range bundles {
		label := b.Version
		if b.Default {
			label += " (default)"
		}
		bo = append(bo, option{b.Version, label})
	}
	return field{id: fieldOperator, label: "GPU Operator release", kind: kindSelect, options: bo,
		help: "NVIDIA GPU Operator release to install; the default is the newest gpuctl has tested"}
}

func taintField() field {
	return field{id: fieldTaint, label: "Taint GPU nodes", kind: kindSelect,
		options: []option{{taintAuto, "auto: where no pod would be stranded and GPU pods get the toleration"},
			{taintYes, "yes: nvidia.com/gpu=present:NoSchedule (--taint)"}, {taintNo, "no (--no-taint)"}},
		help: "keeps pods that do not ask for GPUs off the GPU nodes; the review shows gpuctl's decision and why; gpuctl untaint undoes it"}
}

// driverField offers who brings the driver, as far as the chosen profile leaves a choice.
func driverField(chosen profile.Profile) field {
	df := field{id: fieldDriver, label: "GPU driver", kind: kindSelect}
	switch {
	case profileVGPU(chosen):
		df.options = []option{{driverContainer, "vGPU guest driver container (NVIDIA AI Enterprise)"}}
		df.help = "the " + chosen.Name + " profile runs NVIDIA's vGPU guest driver; a host driver is not an option"
	case profileDriver(chosen) == driverPlatform:
		df.options = []option{{driverPlatform, "platform-managed"}}
		df.help = "the " + chosen.Name + " platform installs the driver on its GPU nodes; the operator does not"
	case distro.ForProfile(chosen.Name).NoPrecompiledDriver != "":
		// OpenShift builds the driver with the Driver Toolkit; NVIDIA publishes no precompiled RHCOS driver.
		df.options = []option{{driverContainer, "driver container: the operator installs it"}, {driverHost, "pre-installed on the nodes"}}
		df.help = "choose pre-installed only if every GPU node already runs an NVIDIA driver"
	default:
		df.options = []option{{driverContainer, "driver container: the operator installs it"},
			{driverPrecompiled, "driver container, precompiled where the registry has the node's kernel (--precompiled auto)"},
			{driverHost, "pre-installed on the nodes"}}
		df.help = "precompiled images skip the build on the node; the plan shows each node's (docs/drivers.md); pre-installed only if every GPU node runs a driver"
	}
	return df
}

func migField() field {
	return field{id: fieldMIG, label: "MIG strategy", kind: kindSelect,
		options: []option{{"single", "single (chart default)"}, {"mixed", "mixed"}, {"none", "none"}},
		help:    "how MIG slices are advertised: single when all GPUs of a node share one layout"}
}

// sharingField offers GPU sharing for every GPU node; a pool of its own, or MIG configs per pool, are
// --sharing POOL=… and --mig POOL=… on the command line (docs/sharing.md).
func sharingField() field {
	return field{id: fieldSharing, label: "GPU sharing", kind: kindSelect,
		options: []option{{"", "off: one pod per GPU"}, {"time-slicing=2", "time-slicing, 2 pods per GPU"}, {"time-slicing=4", "time-slicing, 4 pods per GPU"},
			{"mps=2", "MPS, 2 pods per GPU (memory and compute split)"}, {"mps=4", "MPS, 4 pods per GPU"}},
		help: "every GPU node (--sharing); per node pool, or MIG partitions: --sharing POOL=MODE=N, --mig POOL=CONFIG (docs/sharing.md)"}
}

// gpusField offers how pods get GPUs: the device plugin, or DRA through v26.7.0's GPUCluster.
func gpusField() field {
	return field{id: fieldGPUs, label: "GPU allocation", kind: kindSelect,
		options: []option{{gpusDevicePlugin, "device plugin: pods request nvidia.com/gpu"}, {gpusDRA, "DRA: pods claim GPUs (v26.7.0, Kubernetes 1.34+; --dra)"}},
		help:    "DRA replaces the device plugin and so excludes sharing and the MIG strategy; the review refuses what cannot work (docs/dra.md)"}
}

// licensingFields are the NVIDIA AI Enterprise inputs, keeping what was typed in them before.
func licensingFields(st styles, c choices, old []field) []field {
	keep := map[string]field{}
	for _, f := range old {
		keep[f.id] = f
	}
	nf := keep[fieldNLS]
	if nf.id == "" {
		nf = field{id: fieldNLS, label: "NLS client token", kind: kindFile, input: newInput(st, c.NLSTokenFile, false),
			help: "client_configuration_token.tok from the NVIDIA Licensing Portal; ctrl+o browses"}
	}
	gf := keep[fieldGridd]
	if gf.id == "" {
		gf = field{id: fieldGridd, label: "gridd.conf", kind: kindFile, input: newInput(st, c.GriddConfFile, false),
			help: "the vGPU licensing gridd.conf (an empty file is valid); ctrl+o browses"}
	}
	kf := keep[fieldNGC]
	if kf.id == "" {
		kf = field{id: fieldNGC, label: "NGC API key", kind: kindSecret, input: newInput(st, c.NGCKey, true),
			help: "pulls the driver from nvcr.io/nvaie; masked, never saved (empty: use $" + ngcKeyEnv + ")"}
	}
	return []field{nf, gf, kf}
}

func newInput(st styles, value string, secret bool) textinput.Model {
	in := textinput.New()
	if !st.color {
		// No colour: plain text, and the cursor a reverse-video block that does not blink.
		s := textinput.DefaultStyles(true)
		plain := lipgloss.NewStyle()
		s.Focused = textinput.StyleState{Text: plain, Placeholder: plain, Suggestion: plain, Prompt: plain}
		s.Blurred = s.Focused
		s.Cursor.Color, s.Cursor.Blink = nil, false
		in.SetStyles(s)
	}
	in.Prompt = ""
	in.SetValue(value)
	in.CharLimit = 4096
	if secret {
		in.EchoMode = textinput.EchoPassword
		in.EchoCharacter = '•'
	}
	return in
}

// choicesFrom reads the fields' answers.
func choicesFrom(fs []field) choices {
	c := choices{Taint: taintAuto}
	for i := range fs {
		f := &fs[i]
		switch f.id {
		case fieldProfile:
			c.Profile = f.value()
		case fieldOperator:
			c.Operator = f.value()
		case fieldTaint:
			c.Taint = f.value()
		case fieldDriver:
			c.Driver = f.value()
		case fieldMIG:
			c.MIG = f.value()
		case fieldSharing:
			c.Sharing = f.value()
		case fieldGPUs:
			c.GPUs = f.value()
		case fieldNLS:
			c.NLSTokenFile = f.value()
		case fieldGridd:
			c.GriddConfFile = f.value()
		case fieldNGC:
			c.NGCKey = f.input.Value()
		}
	}
	return c
}

// ngcKeyEnv is the environment variable the NGC key is read from (the --ngc-api-key-env default).
const ngcKeyEnv = "NGC_API_KEY"

// options turns the base options (flags) and the choices into the install's options. Only what
// differs from what gpuctl would do anyway is set, so the saved config says what the person chose.
func options(base engine.InstallOptions, detected string, profiles []profile.Profile, c choices) engine.InstallOptions {
	o := base
	o.Set = slices.Clone(base.Set)
	o.Profile = ""
	if c.Profile != detected || base.Profile != "" {
		o.Profile = c.Profile
	}
	o.OperatorVersion = ""
	if b := bundle.Default(); c.Operator != "" && c.Operator != b.Version {
		o.OperatorVersion = c.Operator
	}
	o.NoTaint, o.Taint = c.Taint == taintNo, c.Taint == taintYes
	var chosen profile.Profile
	for _, p := range profiles {
		if p.Name == c.Profile {
			chosen = p
		}
	}
	if c.Driver == driverHost && profileDriver(chosen) == driverContainer {
		o.Set = append(o.Set, "driver.enabled=false")
	}
	o.Precompiled = ""
	if c.Driver == driverPrecompiled && profileDriver(chosen) == driverContainer {
		o.Precompiled = plan.PrecompiledAuto
	}
	if c.MIG != "" && c.MIG != chartMIGStrategy && len(base.MIG) == 0 {
		o.Set = append(o.Set, "mig.strategy="+c.MIG)
	}
	o.Sharing = withClusterSharing(base.Sharing, c.Sharing)
	o.DRA = c.GPUs == gpusDRA
	if profileLicensing(chosen) {
		o.Licensing.NLSTokenFile = c.NLSTokenFile
		o.Licensing.GriddConfFile = c.GriddConfFile
		if o.Licensing.NGCAPIKeyEnv == "" && o.Licensing.NGCAPIKeyFile == "" {
			o.Licensing.NGCAPIKeyEnv = ngcKeyEnv
		}
	} else {
		o.Licensing.NLSTokenFile, o.Licensing.GriddConfFile = base.Licensing.NLSTokenFile, base.Licensing.GriddConfFile
	}
	return o
}

// withClusterSharing is the --sharing values with the whole cluster's choice replaced by v ("" none):
// the pools' own choices from the flags (POOL=MODE=N) stay.
func withClusterSharing(values []string, v string) []string {
	var out []string
	for _, s := range values {
		if strings.Count(s, "=") == 2 {
			out = append(out, s)
		}
	}
	if v != "" {
		out = append([]string{v}, out...)
	}
	return out
}

// initialChoices are the detected answers: the detected profile, the default release, taint unless
// the flags said not to, the host driver where detection found one, the chart's MIG strategy.
func initialChoices(base engine.InstallOptions, detected string, hostDriver bool, profiles []profile.Profile) choices {
	c := choices{Profile: detected, Operator: bundle.Default().Version, Taint: taintChoice(base), MIG: chartMIGStrategy, GPUs: gpusDevicePlugin,
		NLSTokenFile: base.Licensing.NLSTokenFile, GriddConfFile: base.Licensing.GriddConfFile}
	if base.Profile != "" {
		c.Profile = base.Profile
	}
	if base.OperatorVersion != "" {
		if b, err := bundle.Get(base.OperatorVersion); err == nil {
			c.Operator = b.Version
		}
	}
	if base.DRA {
		c.GPUs = gpusDRA
	}
	for _, v := range base.Sharing {
		if strings.Count(v, "=") == 1 {
			c.Sharing = v // shown if the field offers it; kept either way unless changed
		}
	}
	c.Driver = driverContainer
	for _, p := range profiles {
		if p.Name == c.Profile && profileDriver(p) == driverPlatform {
			c.Driver = driverPlatform
		}
	}
	if hostDriver && c.Driver == driverContainer {
		c.Driver = driverHost
	}
	if base.Precompiled == plan.PrecompiledAuto && c.Driver == driverContainer {
		c.Driver = driverPrecompiled
	}
	return c
}
