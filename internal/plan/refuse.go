package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	nvdp "github.com/NVIDIA/k8s-device-plugin/api/config/v1"
	"sigs.k8s.io/yaml"
)

// What NVIDIA's components refuse at start-up, the plan refuses first (exit 2, nothing written): a
// device plugin that exits on its flags or its config crash-loops on every GPU node, and an operator
// that refuses a spec leaves the install waiting until it times out, both long after gpuctl has written
// everything. Each refusal is one line that names the inputs, quotes the component's own words and says
// where they are. The device plugin's config files are read with NVIDIA's own package
// (github.com/NVIDIA/k8s-device-plugin/api/config/v1), as the plugin reads them.
//
// The device plugin's sources are v0.19.0's, the newest release the Go module proxy serves; GPU Operator
// v26.7.0 deploys v0.20.0.
const (
	pluginTag   = "v0.19.0"
	operatorTag = "v26.7.0"
	// draDocs is NVIDIA's page of the GPUCluster, the operator's DRA stack.
	draDocs = "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-dra.html"
	// draMinKubernetesPatch: "Kubernetes v1.34.2 or later is required" (draDocs, "Limitations and
	// Restrictions"); refuseDRA judges the minor release (draMinKubernetes) before anything is planned.
	draMinKubernetesPatch = "1.34.2"
	// mpsMaxClients is the most replicas an MPS server takes per GPU of compute capability 7.5 or newer
	// (16 below it), which NVIDIA's MPS control daemon asserts before it starts one
	// (cmd/mps-control-daemon/mps/device.go, maxClients, v0.19.0).
	mpsMaxClients = 48
	// chartMIGStrategy is our chart's mig.strategy where no layer sets one (charts/gpu-operator/values.yaml,
	// as NVIDIA's chart): the operator passes it to the device plugin as MIG_STRATEGY.
	chartMIGStrategy = nvdp.MigStrategySingle
)

func pluginAt(file, function string) string {
	return "NVIDIA/k8s-device-plugin " + file + ", " + function + ", " + pluginTag
}

func operatorAt(file, function string) string {
	return "NVIDIA/gpu-operator " + file + ", " + function + ", " + operatorTag
}

// refusal is the one line: what the inputs ask, who refuses it and how, its words, where they are, and
// the way out.
func refusal(what, who, words, where, fix string) error {
	words = strings.ReplaceAll(words, "\n", " ")
	return fmt.Errorf("%w: %s: %s \"%s\" (%s); %s", ErrInput, what, who, words, where, fix)
}

// refuseStartup passes the Helm path's plan through unless NVIDIA's components would refuse what it
// gives them: the operator release's values as planned (every layer merged, so --sharing, --mig,
// --precompiled, -f and --set alike), and for --dra the cluster's Kubernetes release.
func (b *builder) refuseStartup(p *Plan, err error) (*Plan, error) {
	if err != nil {
		return nil, err
	}
	if err := b.refuseDRAPatch(); err != nil {
		return nil, err
	}
	if op := p.Step("release-" + OperatorRelease); op != nil && op.Release != nil {
		if err := refuseDriver(op.Release); err != nil {
			return nil, err
		}
		if err := b.refuseDevicePlugin(op.Release); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// refuseDRAPatch refuses --dra on a Kubernetes 1.34 before 1.34.2, which NVIDIA's GPUCluster page
// requires. A provider's build of 1.34.2 (v1.34.2-eks-…, v1.34.2-gke.…) is 1.34.2.
func (b *builder) refuseDRAPatch() error {
	if !b.o.DRA {
		return nil
	}
	kv := b.det.KubernetesVersion
	v, err := semver.NewVersion(kv)
	if err != nil {
		return nil // refuseDRA refused it already
	}
	if c, err := semver.NewConstraint(">= " + draMinKubernetesPatch + "-0"); err != nil || c.Check(v) {
		return nil
	}
	return &DRAError{fmt.Sprintf("the API server runs Kubernetes %s, and NVIDIA's GPUCluster page says \"Kubernetes v%s or later is required\" (%s, Limitations and Restrictions); upgrade the cluster, or install without --dra",
		kv, draMinKubernetesPatch, draDocs)}
}

// refuseDriver refuses GPUDirect Storage or GDRCopy with precompiled drivers, which NVIDIA's operator
// refuses: in an NVIDIADriver (its controller marks it NotReady and deploys nothing) and in the
// ClusterPolicy (it fails the driver DaemonSet's transform).
func refuseDriver(rel *Release) error {
	v := rel.Values
	if at(v, "driver", "enabled") == false {
		return nil
	}
	gds, gdrcopy := at(v, "gds", "enabled") == true, at(v, "gdrcopy", "enabled") == true
	if !gds && !gdrcopy {
		return nil
	}
	var extras []string
	if gds {
		extras = append(extras, "gds.enabled=true ("+sourceOf(rel.Layers, "gds", "enabled")+")")
	}
	if gdrcopy {
		extras = append(extras, "gdrcopy.enabled=true ("+sourceOf(rel.Layers, "gdrcopy", "enabled")+")")
	}
	fix := "build the driver on the nodes (no --precompiled, driver.usePrecompiled=false), or turn GPUDirect Storage and GDRCopy off"
	if at(v, "driver", "nvidiaDriverCRD", "enabled") == true {
		precompiled := ""
		if at(v, "driver", "nvidiaDriverCRD", "deployDefaultCR") != false && at(v, "driver", "usePrecompiled") == true {
			precompiled = "driver.usePrecompiled=true (" + sourceOf(rel.Layers, "driver", "usePrecompiled") + ")"
		}
		kernels, _ := at(v, "driver", "nvidiaDriverCRD", "kernelDrivers").([]any)
		if slices.ContainsFunc(kernels, func(k any) bool { m, _ := k.(map[string]any); return m["usePrecompiled"] == true }) {
			precompiled = "precompiled NVIDIADrivers (" + sourceOf(rel.Layers, "driver", "nvidiaDriverCRD", "kernelDrivers") + ")"
		}
		if precompiled == "" {
			return nil
		}
		return refusal(precompiled+" with "+strings.Join(extras, " and "), "NVIDIA's operator refuses the NVIDIADriver with",
			"GPUDirect Storage driver (nvidia-fs) and/or GDRCopy driver is not supported along with pre-compiled NVIDIA drivers",
			operatorAt("controllers/nvidiadriver_controller.go", "(*NVIDIADriverReconciler).Reconcile"), fix)
	}
	if at(v, "driver", "usePrecompiled") != true {
		return nil
	}
	what := "driver.usePrecompiled=true (" + sourceOf(rel.Layers, "driver", "usePrecompiled") + ") with " + strings.Join(extras, " and ")
	if gds {
		return refusal(what, "NVIDIA's operator refuses the driver DaemonSet with",
			"GPUDirect Storage driver (nvidia-fs) is not supported along with pre-compiled NVIDIA drivers",
			operatorAt("controllers/object_controls.go", "transformGDSContainer"), fix)
	}
	return refusal(what, "NVIDIA's operator refuses the driver DaemonSet with", "GDRCopy is not supported along with pre-compiled NVIDIA drivers",
		operatorAt("controllers/object_controls.go", "transformGDRCopyContainer"), fix)
}

// pluginFile is one device-plugin config file the operator release creates, as NVIDIA's package reads it.
type pluginFile struct {
	// key is its key in devicePlugin.config.data; origin names the input it came from ("--sharing
	// l4=mps=4", "devicePlugin.config.data.KEY (file x.yaml)").
	key, origin string
	cfg         nvdp.Config
}

// refuseDevicePlugin refuses values with which NVIDIA's device plugin (and its MPS control daemon) would
// not start: its config files, the flags the values set through its environment, and MPS under the
// mixed MIG strategy. Nothing is judged where the values turn the device plugin off.
func (b *builder) refuseDevicePlugin(rel *Release) error {
	v := rel.Values
	if at(v, "devicePlugin", "enabled") == false {
		return nil
	}
	env, envOrigin := pluginEnvOf(rel)
	validate := pluginAt("cmd/nvidia-device-plugin/main.go", "validateFlags")
	if s, ok := env["DEVICE_ID_STRATEGY"]; ok && s != nvdp.DeviceIDStrategyUUID && s != nvdp.DeviceIDStrategyIndex {
		return refusal(envOrigin("DEVICE_ID_STRATEGY"), "NVIDIA's device plugin exits at start with",
			"invalid --device-id-strategy option: "+s, validate, "use uuid or index")
	}
	if s, ok := env["DEVICE_LIST_STRATEGY"]; ok {
		if _, err := nvdp.NewDeviceListStrategies(splitFlag(s)); err != nil {
			return refusal(envOrigin("DEVICE_LIST_STRATEGY"), "NVIDIA's device plugin exits at start with",
				"invalid --device-list-strategy option: "+err.Error(), validate, "use envvar, volume-mounts, cdi-annotations or cdi-cri")
		}
	}
	if s, ok := env["DEVICE_DISCOVERY_STRATEGY"]; ok && !validDiscovery(s) {
		return refusal(envOrigin("DEVICE_DISCOVERY_STRATEGY"), "NVIDIA's device plugin exits at start with",
			"invalid --device-discovery-strategy option "+s, validate, "use auto, nvml or tegra")
	}
	strategy, strategyOrigin := migStrategyOf(rel, env, envOrigin)
	if !slices.Contains([]string{nvdp.MigStrategyNone, nvdp.MigStrategySingle, nvdp.MigStrategyMixed}, strategy) {
		return refusal(strategyOrigin, "NVIDIA's device plugin exits at start with", "unknown MIG strategy: "+strategy, validate, "use none, single or mixed")
	}
	files, err := b.pluginFiles(rel)
	if err != nil {
		return err
	}
	if def, _ := at(v, "devicePlugin", "config", "default").(string); def != "" && len(files) > 0 &&
		!slices.ContainsFunc(files, func(f pluginFile) bool { return f.key == def }) {
		// The message leaves the name out: NVIDIA's code prints the node's label value, empty here.
		return refusal("devicePlugin.config.default "+def+" ("+sourceOf(rel.Layers, "devicePlugin", "config", "default")+") is no key of devicePlugin.config.data",
			"NVIDIA's config manager exits before the device plugin starts with", "specified config  does not exist",
			pluginAt("cmd/config-manager/main.go", "updateConfigName"), "name one of the data's keys, or none")
	}
	for _, f := range files {
		_, discoveryInEnv := env["DEVICE_DISCOVERY_STRATEGY"]
		if err := refusePluginFile(f, discoveryInEnv, strategy, strategyOrigin); err != nil {
			return err
		}
	}
	return nil
}

// refusePluginFile refuses a device plugin config file (devicePlugin.config.data) NVIDIA's device
// plugin or MPS control daemon would exit on: a discovery strategy it does not know (unless the env
// sets one), IMEX channel IDs other than none or 0, MPS under the mixed MIG strategy, more MPS
// replicas than an MPS server takes.
func refusePluginFile(f pluginFile, discoveryInEnv bool, strategy, strategyOrigin string) error {
	validate := pluginAt("cmd/nvidia-device-plugin/main.go", "validateFlags")
	if !discoveryInEnv && f.cfg.Flags.DeviceDiscoveryStrategy != nil && !validDiscovery(*f.cfg.Flags.DeviceDiscoveryStrategy) {
		return refusal(f.origin, "NVIDIA's device plugin exits at start with",
			"invalid --device-discovery-strategy option "+*f.cfg.Flags.DeviceDiscoveryStrategy, validate, "set flags.deviceDiscoveryStrategy to auto, nvml or tegra")
	}
	if err := nvdp.AssertChannelIDsValid(f.cfg.Imex.ChannelIDs); err != nil {
		return refusal(f.origin, "NVIDIA's device plugin exits at start with", "invalid IMEX channel IDs: "+err.Error(), validate, "set imex.channelIDs to [] or [0]")
	}
	if f.cfg.Sharing.SharingStrategy() != nvdp.SharingStrategyMPS {
		return nil
	}
	if strategy == nvdp.MigStrategyMixed {
		return refusal(f.origin+" with "+strategyOrigin, "NVIDIA's device plugin exits at start with",
			"using --mig-strategy=mixed is not supported with MPS", validate,
			"the MIG strategy is the whole cluster's (the ClusterPolicy's mig.strategy), so no node may run MPS under mixed: share those GPUs by time-slicing, or use the single strategy")
	}
	for _, r := range f.cfg.Sharing.MPS.Resources {
		if r.Replicas > mpsMaxClients {
			return refusal(f.origin, "NVIDIA's MPS control daemon exits at start with",
				fmt.Sprintf("invalid MPS configuration: invalid device maximum allowed replicas exceeded: %d > %d", r.Replicas, mpsMaxClients),
				pluginAt("cmd/mps-control-daemon/mps/device.go", "(*mpsDevice).assertReplicas"),
				fmt.Sprintf("an MPS server takes at most %d clients (16 on GPUs older than compute capability 7.5)", mpsMaxClients))
		}
	}
	return nil
}

// pluginFiles reads the device-plugin config files the release creates (devicePlugin.config.data with
// create: true; a ConfigMap that exists elsewhere is not gpuctl's to read) as the plugin reads its
// --config-file: sigs.k8s.io/yaml into NVIDIA's v1.Config, whose UnmarshalJSON methods validate the
// sharing replicas, resource names and devices, then its version (api/config/v1/config.go,
// parseConfigFrom). It refuses a file the plugin could not read.
func (b *builder) pluginFiles(rel *Release) ([]pluginFile, error) {
	data, _ := at(rel.Values, "devicePlugin", "config", "data").(map[string]any)
	if at(rel.Values, "devicePlugin", "config", "create") != true || len(data) == 0 {
		return nil, nil
	}
	var choices []SharingChoice
	if sourceOf(rel.Layers, "devicePlugin", "config", "data") == SharingSource {
		choices, _ = ParseSharing(b.o.Sharing) // Build parsed them already
	}
	var files []pluginFile
	for _, key := range slices.Sorted(maps.Keys(data)) {
		origin := "devicePlugin.config.data." + key + " (" + sourceOf(rel.Layers, "devicePlugin", "config", "data", key) + ")"
		var given []string
		for _, c := range choices {
			if c.Key() == key {
				given = append(given, c.String())
			}
		}
		if len(given) > 0 {
			origin = "--sharing " + strings.Join(given, " and ")
		}
		doc, ok := data[key].(string)
		if !ok {
			return nil, fmt.Errorf("%w: %s: a ConfigMap's data is text: give the device-plugin config file as a string (%s: |)", ErrInput, origin, key)
		}
		f := pluginFile{key: key, origin: origin}
		where := pluginAt("api/config/v1/config.go", "parseConfigFrom")
		if err := yaml.Unmarshal([]byte(doc), &f.cfg); err != nil {
			fix := "fix the config file (NVIDIA's schema: https://github.com/NVIDIA/k8s-device-plugin#configuration-file)"
			if len(given) > 0 {
				fix = "NVIDIA's plugin shares a GPU 2 ways or more: give N of 2 or more, or leave those GPUs unshared"
			}
			return nil, refusal(origin, "NVIDIA's device plugin cannot read it and exits at start with", "unmarshal error: "+err.Error(), where, fix)
		}
		if f.cfg.Version != "" && f.cfg.Version != nvdp.Version {
			return nil, refusal(origin, "NVIDIA's device plugin cannot read it and exits at start with", "unknown version: "+f.cfg.Version, where,
				"use version: "+nvdp.Version)
		}
		files = append(files, f)
	}
	return files, nil
}

// pluginEnvOf is devicePlugin.env as the device plugin sees it (the operator sets each variable after its
// own, the last of a name winning: TransformDevicePlugin in controllers/object_controls.go, v26.7.0),
// without variables taken from elsewhere (valueFrom), and a function that names one of them.
func pluginEnvOf(rel *Release) (map[string]string, func(name string) string) {
	env := map[string]string{}
	list, _ := at(rel.Values, "devicePlugin", "env").([]any)
	for _, e := range list {
		m, _ := e.(map[string]any)
		name, _ := m["name"].(string)
		if value, ok := m["value"].(string); ok && name != "" {
			env[name] = value
		}
	}
	source := sourceOf(rel.Layers, "devicePlugin", "env")
	return env, func(name string) string {
		return "devicePlugin.env " + name + "=" + env[name] + " (" + source + ")"
	}
}

// migStrategyOf is the --mig-strategy the device plugin runs with, and the input that sets it: its
// MIG_STRATEGY variable from devicePlugin.env, else the ClusterPolicy's mig.strategy, which the operator
// passes as MIG_STRATEGY over the config file's flags.migStrategy (applyMIGConfiguration in
// controllers/object_controls.go, v26.7.0).
func migStrategyOf(rel *Release, env map[string]string, envOrigin func(string) string) (string, string) {
	if s, ok := env["MIG_STRATEGY"]; ok {
		return s, envOrigin("MIG_STRATEGY")
	}
	v := at(rel.Values, "mig", "strategy")
	if v == nil {
		return chartMIGStrategy, "the chart's mig.strategy " + chartMIGStrategy
	}
	s := fmt.Sprint(v)
	switch source := sourceOf(rel.Layers, "mig", "strategy"); source {
	case MIGSource:
		return s, "--mig " + s
	case "--set":
		return s, "--set mig.strategy=" + s
	default:
		return s, "mig.strategy " + s + " (" + source + ")"
	}
}

// sourceOf names the highest layer that sets the value at path.
func sourceOf(layers []Layer, path ...string) string {
	for i := len(layers) - 1; i >= 0; i-- {
		if at(layers[i].Values, path...) != nil {
			return layers[i].Source
		}
	}
	return "the chart's default"
}

// splitFlag splits a list flag's value as the plugin's command line does from its environment
// (urfave/cli v2: on commas, spaces trimmed).
func splitFlag(s string) []string {
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// validDiscovery: the device plugin's --device-discovery-strategy values (validateFlags, v0.19.0; GPU
// feature discovery takes vfio too).
func validDiscovery(s string) bool { return slices.Contains([]string{"auto", "nvml", "tegra"}, s) }

// CheckSharingMIGInputs refuses, from the flags alone and so before anything is written (the lock's
// Lease included), MPS sharing under the mixed MIG strategy, which NVIDIA's device plugin refuses at
// start (refuseDevicePlugin judges the planned values, -f and --set included, the same way).
func CheckSharingMIGInputs(sharing, mig []string) error {
	m, err := ParseMIG(mig)
	if err != nil || m == nil || m.Strategy != MIGMixed {
		return err
	}
	choices, err := ParseSharing(sharing)
	if err != nil {
		return err
	}
	for _, c := range choices {
		if c.Mode == SharingMPS {
			return refusal("--sharing "+c.String()+" with --mig "+MIGMixed, "NVIDIA's device plugin exits at start with",
				"using --mig-strategy=mixed is not supported with MPS", pluginAt("cmd/nvidia-device-plugin/main.go", "validateFlags"),
				"the MIG strategy is the whole cluster's (the ClusterPolicy's mig.strategy), so no node may run MPS under mixed: share those GPUs by time-slicing, or use the single strategy")
		}
	}
	return nil
}
