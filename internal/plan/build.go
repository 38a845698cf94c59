package plan

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/profile"
)

// Release names, as `helm list` shows them. The operator's matches NVIDIA's documentation.
const (
	NFDRelease      = "node-feature-discovery"
	OperatorRelease = "gpu-operator"
	// ClusterPolicyName is the ClusterPolicy our chart renders (and NVIDIA's does).
	ClusterPolicyName = "cluster-policy"
	// OperatorDeployment is the operator Deployment's name in both charts (NVIDIA/gpu-operator
	// deployments/gpu-operator/templates/operator.yaml@v26.7.0).
	OperatorDeployment = "gpu-operator"
)

// GKEDriverInstaller is the chart of Google's driver installer DaemonSet
// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html).
const GKEDriverInstaller = "gke-driver-installer"

// GPU taint, as https://cloud.google.com/kubernetes-engine/docs/how-to/gpus and NVIDIA/gpu-operator
// deployments/gpu-operator/values.yaml@v26.7.0 suggest: key = the resource name, matched by every NVIDIA toleration.
const (
	TaintKey    = "nvidia.com/gpu"
	TaintValue  = "present"
	TaintEffect = "NoSchedule"
)

// ErrUnsupported is returned for clusters gpuctl cannot install on (yet).
var ErrUnsupported = errors.New("unsupported")

// ErrInput marks a mistake in the user's options that the plan finds (a --channel that cannot offer the
// operator release asked for); the engine's ErrInput is the same error.
var ErrInput = errors.New("invalid input")

// ChartInfo describes an embedded chart.
type ChartInfo struct {
	Name       string
	Version    string
	AppVersion string
}

// Options are the user's choices (from flags, a config file or the wizard).
type Options struct {
	// Profile forces a values profile; "" chooses one from the detected distribution.
	Profile string
	// Files are the -f values files, in order, already parsed; Set is the parsed --set values.
	Files []Layer
	Set   map[string]any
	// Namespace to install into (default gpu-operator).
	Namespace string
	// NoTaint skips tainting the GPU nodes.
	NoTaint bool
	// Taint taints the GPU nodes even where gpuctl would not by default (DecideTaint): where every
	// schedulable node is a GPU node, or nothing adds the GPU toleration to pods that request GPUs.
	Taint bool
	// Timeout bounds the run (default 20m).
	Timeout time.Duration
	// Licensing names the NVAIE inputs (TKGS/VKS with vGPU).
	Licensing Licensing
	// Channel is the OLM channel of NVIDIA's certified operator on OpenShift ("" = the package's default).
	Channel string
	// TolerateExistingTaints adds tolerations for the GPU nodes' own taints that the NFD worker and
	// the operands do not tolerate (a values layer above the detected facts, below -f and --set).
	TolerateExistingTaints bool
	// Monitoring asks the operator for the DCGM exporter's and its own ServiceMonitors (a values layer
	// above the detected facts, below -f and --set) and installs the gpu-monitoring chart after it, where
	// the cluster serves monitoring.coreos.com; elsewhere the plan warns and leaves monitoring off.
	Monitoring bool
}

// Input is everything Build reads.
type Input struct {
	Detection *detect.Result
	// Profile looks a profile up by name (profile.Get).
	Profile func(name string) (profile.Profile, error)
	// Charts are the embedded charts by name.
	Charts map[string]ChartInfo
	// Bundle is the operator release to install when it is not the charts' own (--operator-version):
	// its image pins become the lowest layer above the chart defaults.
	Bundle  *BundleValues
	Options Options
}

// BundleValues are an operator release's image pins (internal/bundle).
type BundleValues struct {
	Version       string
	Operator, NFD map[string]any
}

// Build makes the install Plan.
func Build(in Input) (*Plan, error) {
	det := in.Detection
	if det == nil {
		return nil, errors.New("plan: no detection result")
	}
	o := in.Options
	if o.Namespace == "" {
		o.Namespace = "gpu-operator"
	}
	if o.Timeout == 0 {
		o.Timeout = 20 * time.Minute
	}
	if o.Taint && o.NoTaint {
		return nil, fmt.Errorf("%w: --taint and --no-taint contradict each other: give one of them", ErrInput)
	}
	distro := det.Distribution.Name
	if det.Autopilot != nil && det.Autopilot.Detected {
		return nil, fmt.Errorf("%w: GKE Autopilot does not allow the GPU operator's privileged DaemonSets (NVIDIA supports GKE Standard only); use a Standard cluster or GKE's own GPU support", ErrUnsupported)
	}

	p := &Plan{
		Distribution:    distro,
		DistributionWhy: distributionWhy(det.Distribution),
		Namespace:       o.Namespace,
		Timeout:         Duration(o.Timeout),
		Warnings:        slices.Clone(det.Warnings),
	}
	for _, n := range det.GPUNodes {
		p.GPUNodes = append(p.GPUNodes, n.Name)
	}
	sort.Strings(p.GPUNodes)

	prof, err := chooseProfile(in, p)
	if err != nil {
		return nil, err
	}

	if distro == "openshift" {
		if op := det.Existing.GPUOperator; op.Present && !ownSubscription(op.OLM, OpenShiftOperatorNS, OperatorPackage) {
			return nil, fmt.Errorf("a GPU operator is already installed (%s): gpuctl will not install a second one next to it; uninstall it first, or manage it with the tool that installed it", describeOperator(op))
		}
		if o.Monitoring {
			p.Warnings = append(p.Warnings, "--monitoring: not used on OpenShift, where gpuctl labels the operator namespace openshift.io/cluster-monitoring=true for OpenShift's own monitoring stack instead")
		}
		return buildOpenShift(in, p, prof, o)
	}
	if op := det.Existing.GPUOperator; op.Present && !ours(op.Helm, OperatorRelease, o.Namespace) {
		return nil, fmt.Errorf("a GPU operator is already installed (%s): gpuctl will not install a second one next to it; uninstall it first, or manage it with the tool that installed it", describeOperator(op))
	}
	nfdForeign := det.Existing.NFD.Present && !ours(det.Existing.NFD.Helm, NFDRelease, o.Namespace)
	if o.Channel != "" {
		p.Warnings = append(p.Warnings, "--channel "+o.Channel+": not used, OLM channels apply on OpenShift only and this is "+distro+" (installed with Helm)")
	}

	opValues, nfdValues := split(prof.Values)
	opValues, nfdValues = clone(opValues), merge(nfdValues, prof.NFD)
	// Platform objects in the profile (extraObjects, e.g. GKE's ResourceQuota) are applied by gpuctl
	// before NFD, which needs them too; Helm must not also own them.
	delete(opValues, "extraObjects")
	var opLayers, nfdLayers []Layer
	if b := in.Bundle; b != nil {
		opLayers = append(opLayers, Layer{Source: "operator bundle " + b.Version, Values: normalized(b.Operator)})
		if len(b.NFD) > 0 {
			nfdLayers = append(nfdLayers, Layer{Source: "operator bundle " + b.Version, Values: normalized(b.NFD)})
		}
	}
	if b := in.Bundle; b != nil && b.Version != in.Charts[OperatorRelease].AppVersion {
		return nil, fmt.Errorf("plan: the gpu-operator chart is loaded for %s, not for operator release %s", in.Charts[OperatorRelease].AppVersion, b.Version)
	}
	opLayers = append(opLayers, Layer{Source: "profile " + prof.Name, Values: normalized(opValues)})
	nfdLayers = append(nfdLayers, Layer{Source: "profile " + prof.Name, Values: normalized(nfdValues)})

	decision := DecideTaint(det, TaintOptions{Force: o.Taint, NoTaint: o.NoTaint, PolicyAvailable: true, Own: []string{o.Namespace}})
	opFacts, nfdFacts, why := facts(det, decision)
	opLayers = append(opLayers, Layer{Source: "detected: " + strings.Join(why, "; "), Values: normalized(opFacts)})
	if len(nfdFacts) > 0 {
		nfdLayers = append(nfdLayers, Layer{Source: "detected: " + tolerationsWhy, Values: normalized(nfdFacts)})
	}
	if o.TolerateExistingTaints {
		opTols, nfdTols := existingTaintLayers(det, flatten(opLayers), flatten(nfdLayers))
		if len(opTols.Values) > 0 {
			opLayers = append(opLayers, opTols)
		}
		if len(nfdTols.Values) > 0 {
			nfdLayers = append(nfdLayers, nfdTols)
		}
	}
	var monitoringRelease *Release
	if o.Monitoring {
		values, rel, warning := monitoring(det, in.Charts[MonitoringRelease], in.Charts[OperatorRelease].AppVersion, o.Namespace)
		if warning != "" {
			p.Warnings = append(p.Warnings, warning)
		}
		if values != nil {
			opLayers = append(opLayers, Layer{Source: MonitoringSource, Values: values})
		}
		monitoringRelease = rel
	}
	for _, f := range o.Files {
		op, nfd := split(f.Values)
		opLayers = append(opLayers, Layer{Source: "file " + f.Source, Values: normalized(op)})
		if len(nfd) > 0 {
			nfdLayers = append(nfdLayers, Layer{Source: "file " + f.Source, Values: normalized(nfd)})
		}
	}
	if len(o.Set) > 0 {
		op, nfd := split(o.Set)
		opLayers = append(opLayers, Layer{Source: "--set", Values: normalized(op)})
		if len(nfd) > 0 {
			nfdLayers = append(nfdLayers, Layer{Source: "--set", Values: normalized(nfd)})
		}
	}

	nfdChart, opChart := in.Charts[NFDRelease], in.Charts[OperatorRelease]
	nfdRelease := &Release{Name: NFDRelease, Namespace: o.Namespace, Chart: nfdChart.Name, ChartVersion: nfdChart.Version, AppVersion: nfdChart.AppVersion, Layers: nfdLayers, Values: flatten(nfdLayers)}
	opRelease := &Release{Name: OperatorRelease, Namespace: o.Namespace, Chart: opChart.Name, ChartVersion: opChart.Version, AppVersion: opChart.AppVersion, Layers: opLayers, Values: flatten(opLayers)}

	if distro == "rke2" || distro == "k3s" {
		// RKE2 and k3s detect the NVIDIA runtime and register RuntimeClass nvidia themselves; the operator's
		// toolkit adds the same handler to their containerd (https://docs.rke2.io/add-ons/gpu_operators; k3s-io/docs
		// docs/advanced/advanced.md).
		p.Warnings = append(p.Warnings, "on "+distro+" GPU pods must ask for the NVIDIA runtime: runtimeClassName: nvidia (the RuntimeClass "+distro+" and the operator both provide), or the device plugin's CDI injection")
	}
	add := func(s Step) { p.Steps = append(p.Steps, s) }
	add(Step{ID: "namespace", Kind: KindObjects, Title: "Namespace " + o.Namespace,
		Why:     "the operands are privileged DaemonSets: Pod Security Admission must allow them in this namespace",
		Objects: []map[string]any{namespaceObject(o.Namespace)}})

	prereq := Step{ID: "prerequisites", Kind: KindObjects, Title: "Platform prerequisites", Why: "objects the " + prof.Name + " profile needs before anything runs"}
	for _, obj := range prof.Objects() {
		obj = clone(obj)
		if md, ok := obj["metadata"].(map[string]any); ok {
			if _, has := md["namespace"]; !has && obj["kind"] != "Namespace" {
				md["namespace"] = o.Namespace
			}
		}
		prereq.Objects = append(prereq.Objects, obj)
	}
	if len(prereq.Objects) == 0 {
		prereq.Skip = "the " + prof.Name + " profile needs none"
	}
	add(prereq)

	licensing, notes, err := licensingStep(opRelease.Values, o.Namespace, o.Licensing, det.Existing)
	if err != nil {
		return nil, err
	}
	p.Warnings = append(p.Warnings, notes...)
	add(licensing)
	if distro == "tkgs" {
		// Older TKGS clusters (Kubernetes < 1.25) enforce PodSecurityPolicy; VMware's practice binds
		// psp:vmware-system-privileged to the namespace's service accounts
		// (https://raw.githubusercontent.com/wavefrontHQ/wavefront-collector-for-kubernetes/master/deploy/vsphere-tanzu/0-vsphere-tanzu-rolebinding.yaml).
		// Whether PSP is served is known only at run time.
		add(Step{ID: "psp", Kind: KindPSP, Title: "PodSecurityPolicy RoleBinding (older TKGS)", Target: o.Namespace,
			Why: "operands are privileged; on clusters that still enforce PodSecurityPolicy they need the privileged policy"})
	}

	crds := Step{ID: "crds", Kind: KindCRDs, Title: "CRDs (server-side apply)",
		Why: "Helm installs a chart's CRDs once and never upgrades them; stale CRDs reject new ClusterPolicy fields"}
	if !nfdForeign {
		crds.Charts = append(crds.Charts, NFDRelease)
	}
	crds.Charts = append(crds.Charts, OperatorRelease)
	crds.ChartReleases = map[string]string{OperatorRelease: opChart.AppVersion}
	crds.Title += ", GPU Operator " + opChart.AppVersion
	add(crds)

	nfdStep := Step{ID: "release-" + NFDRelease, Kind: KindRelease, Title: "Install Node Feature Discovery " + nfdChart.AppVersion,
		Why: "the GPU operator finds GPU nodes by NFD's PCI vendor 10de label", Release: nfdRelease}
	if nfdForeign {
		nfdStep.Skip = "NFD already runs (" + describeNFD(det.Existing.NFD) + ")"
		nfdStep.Release = nil
	}
	add(nfdStep)
	add(Step{ID: "wait-nfd", Kind: KindWaitNFD, Title: "Wait for NFD to label the GPU nodes",
		Why: "feature.node.kubernetes.io/pci-10de.present=true marks a node with an NVIDIA PCI device"})
	for _, s := range gkeDriverInstallers(det, in.Charts[GKEDriverInstaller], o.Namespace, at(opRelease.Values, "driver", "enabled")) {
		add(s)
	}

	safety := &Safety{
		TolerationsPlanned: needsTolerations(det, decision),
		OperatorValues:     normalized(operatorTolerations()),
		NFDValues:          normalized(nfdTolerations()),
		OperatorRelease:    "release-" + OperatorRelease,
	}
	if !nfdForeign {
		safety.NFDRelease = "release-" + NFDRelease
	}
	safetyStep := Step{ID: "safety", Kind: KindSafety, Title: "Check what the taint would strand",
		Why:    "the operator Deployment and NFD master/gc do not tolerate nvidia.com/gpu; every GPU DaemonSet must",
		Safety: safety}
	taintStep := Step{ID: "taint", Kind: KindTaint, Title: "Taint GPU nodes " + TaintKey + "=" + TaintValue + ":" + TaintEffect,
		Why: "keeps pods that do not ask for GPUs off GPU nodes (" + decision.Why + "); gpuctl records what it added so untaint removes only that" + workloadsWhy(decision.Workloads),
		Taint: &Taint{Key: TaintKey, Value: TaintValue, Effect: TaintEffect, Nodes: p.GPUNodes, Forced: o.Taint,
			Toleration: decision.Toleration, Workloads: decision.Workloads}}
	waitToleration := Step{ID: "wait-toleration", Kind: KindWaitToleration, Title: "Wait until the API server adds the GPU toleration",
		Why: "gpuctl's MutatingAdmissionPolicy must be in force before the taint, or a GPU pod created in between would not tolerate it"}
	if !decision.Taint {
		safetyStep.Skip = "GPU nodes are not tainted: " + decision.Skip
		if o.NoTaint {
			safetyStep.Skip = "--no-taint: GPU nodes are not tainted"
		}
		taintStep.Skip, taintStep.Why = decision.Skip, ""
	}
	if !decision.Policy || !decision.Taint {
		waitToleration.Skip = "gpuctl installs no MutatingAdmissionPolicy"
		if decision.Toleration == TolerationPlugin {
			waitToleration.Skip = "the API server adds the toleration itself (ExtendedResourceToleration)"
		}
	}
	add(safetyStep)
	opVersion := opChart.AppVersion
	// The taint follows the operator release, which carries gpuctl's MutatingAdmissionPolicy: pods that
	// request GPUs tolerate the taint from the moment it is there.
	add(Step{ID: "release-" + OperatorRelease, Kind: KindRelease, Title: "Install NVIDIA GPU Operator " + opVersion,
		Why: "the operator reconciles the ClusterPolicy into driver, toolkit, device plugin and validator DaemonSets", Release: opRelease})
	if monitoringRelease != nil {
		add(Step{ID: "release-" + MonitoringRelease, Kind: KindRelease, Title: "Install the GPU dashboard and alerts",
			Why:     "--monitoring: a Grafana dashboard ConfigMap for the Grafana sidecar and a PrometheusRule; the operator creates the ServiceMonitors",
			Release: monitoringRelease})
	}
	add(waitToleration)
	add(taintStep)
	add(Step{ID: "wait-operator", Kind: KindWaitOperator, Title: "Wait for the operator Deployment", Target: OperatorDeployment})
	add(Step{ID: "wait-validators", Kind: KindWaitValidators, Title: "Wait for the validator on every GPU node",
		Why: "nvidia-operator-validator is Ready once driver, toolkit, CUDA and device plugin checks passed on its node"})
	add(Step{ID: "wait-allocatable", Kind: KindWaitAllocatable, Title: "Wait for nvidia.com/gpu to be allocatable"})
	add(Step{ID: "wait-clusterpolicy", Kind: KindWaitPolicy, Title: "Wait for ClusterPolicy " + ClusterPolicyName + " to be ready", Target: ClusterPolicyName})
	return p, nil
}

func chooseProfile(in Input, p *Plan) (profile.Profile, error) {
	if in.Profile == nil {
		return profile.Profile{}, errors.New("plan: no profile lookup")
	}
	detected, exact := profile.ForDistribution(p.Distribution)
	name := in.Options.Profile
	switch {
	case name == "":
		name = detected
		p.ProfileWhy = "detected " + p.Distribution
		if !exact {
			p.ProfileWhy = "no profile for " + p.Distribution + "; upstream defaults"
		}
	default:
		p.ProfileWhy = "--profile " + name
		if name != detected {
			p.Warnings = append(p.Warnings, fmt.Sprintf("--profile %s, but the cluster looks like %s (profile %s): %s", name, p.Distribution, detected, p.DistributionWhy))
		}
	}
	prof, err := in.Profile(name)
	if err != nil {
		return prof, err
	}
	p.Profile = prof.Name
	return prof, nil
}

// facts are the values that follow from what detection found: above the profile, below the user's.
func facts(det *detect.Result, d TaintDecision) (op, nfd map[string]any, why []string) {
	op, nfd = map[string]any{}, map[string]any{}
	set(op, false, "nfd", "enabled")
	why = append(why, "NFD is its own release")
	if n := len(det.GPUNodes); n > 0 {
		withDriver := 0
		for _, g := range det.GPUNodes {
			if g.HostDriver != "" {
				withDriver++
			}
		}
		if withDriver == n {
			set(op, false, "driver", "enabled")
			why = append(why, "every GPU node has a host driver")
		}
	}
	if needsTolerations(det, d) {
		op = merge(op, operatorTolerations())
		nfd = merge(nfd, nfdTolerations())
		why = append(why, tolerationsWhy+", so the operator tolerates the taint")
	}
	if d.Taint && d.Policy {
		set(op, true, PolicyValue, "enabled")
		why = append(why, "the API server does not add the GPU toleration to pods that request GPUs and serves MutatingAdmissionPolicy, so gpuctl's policy adds it")
	}
	return op, nfd, why
}

// tolerationsWhy is the detected fact behind the operator's and NFD master/gc's toleration.
const tolerationsWhy = "every schedulable worker is a GPU node"

// needsTolerations: the operator Deployment and NFD master/gc (which tolerate only the control plane)
// must tolerate the GPU taint when it is there, or going to be, and every schedulable worker is a GPU
// node.
func needsTolerations(det *detect.Result, d TaintDecision) bool {
	tainted := d.Taint
	for _, n := range det.GPUNodes {
		tainted = tainted || n.Tainted
	}
	return tainted && (det.Scheduling.AllWorkersGPU || det.Scheduling.AllSchedulableGPU)
}

// controlPlaneToleration is the toleration the operator and NFD master carry by default
// (NVIDIA/gpu-operator deployments/gpu-operator/templates/operator.yaml@v26.7.0; NVIDIA/gpu-operator
// deployments/gpu-operator/values.yaml@v26.7.0); setting tolerations replaces the list, so it is repeated.
func controlPlaneToleration() map[string]any {
	return map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"}
}

func gpuToleration() map[string]any {
	return map[string]any{"key": TaintKey, "operator": "Exists", "effect": TaintEffect}
}

func operatorTolerations() map[string]any {
	return map[string]any{"operator": map[string]any{"tolerations": []any{controlPlaneToleration(), gpuToleration()}}}
}

func nfdTolerations() map[string]any {
	return map[string]any{
		"master": map[string]any{"tolerations": []any{controlPlaneToleration(), gpuToleration()}},
		"gc":     map[string]any{"tolerations": []any{controlPlaneToleration(), gpuToleration()}},
	}
}

func namespaceObject(name string) map[string]any {
	labels := map[string]any{}
	// Pod Security Admission levels: the operands need hostPath, privileged and host PID (psa.enabled in
	// NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0).
	for _, mode := range []string{"enforce", "audit", "warn"} {
		labels["pod-security.kubernetes.io/"+mode] = "privileged"
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": name, "labels": labels},
	}
}

func flatten(layers []Layer) map[string]any {
	out := map[string]any{}
	for _, l := range layers {
		out = merge(out, l.Values)
	}
	return out
}

func ours(h *detect.HelmRelease, name, namespace string) bool {
	return h != nil && h.Name == name && h.Namespace == namespace
}

func distributionWhy(c detect.Candidate) string {
	if c.Fallback || len(c.Evidence) == 0 {
		return "no distribution-specific signal; assuming upstream Kubernetes"
	}
	var parts []string
	for i, e := range c.Evidence {
		if i == 2 {
			break
		}
		parts = append(parts, e.Signal+" "+e.Value)
	}
	return fmt.Sprintf("%d%% confidence: %s", c.Confidence, strings.Join(parts, ", "))
}

func describeOperator(op detect.OperatorInstall) string {
	switch {
	case op.Helm != nil:
		return fmt.Sprintf("Helm release %s/%s", op.Helm.Namespace, op.Helm.Name)
	case op.OLM != nil:
		return fmt.Sprintf("OLM subscription %s/%s", op.OLM.Namespace, op.OLM.Name)
	case op.Deployment != nil:
		return fmt.Sprintf("Deployment %s/%s", op.Deployment.Namespace, op.Deployment.Name)
	default:
		return "found by its ClusterPolicy or subscription"
	}
}

func describeNFD(n detect.NFDInstall) string {
	switch {
	case n.Helm != nil:
		return fmt.Sprintf("Helm release %s/%s", n.Helm.Namespace, n.Helm.Name)
	case len(n.Namespaces) > 0:
		return "in namespace " + strings.Join(n.Namespaces, ", ")
	default:
		return fmt.Sprintf("%d nodes already carry NFD labels", n.LabelledNodes)
	}
}

// gkeDriverInstallers: on GKE, where GKE installs no driver (no cloud.google.com/gke-gpu-driver-version
// label) and the operator's driver container is off (NVIDIA's driver container does not support COS),
// Google's installer DaemonSet puts the driver on the host — one release per node OS variant
// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html, "Google driver installer"
// mode).
func gkeDriverInstallers(det *detect.Result, chart ChartInfo, ns string, driverEnabled any) []Step {
	if det.Distribution.Name != "gke" || driverEnabled != false || chart.Name == "" {
		return nil
	}
	variants := map[string][]string{}
	for _, n := range det.GPUNodes {
		if n.HostDriver != "" {
			continue
		}
		v := "cos"
		if strings.Contains(strings.ToLower(n.OSImage), "ubuntu") {
			v = "ubuntu"
		}
		variants[v] = append(variants[v], n.Name)
	}
	var steps []Step
	for _, v := range []string{"cos", "ubuntu"} {
		nodes := variants[v]
		if len(nodes) == 0 {
			continue
		}
		name := GKEDriverInstaller + "-" + v
		values := map[string]any{"variant": v}
		steps = append(steps, Step{ID: "release-" + name, Kind: KindRelease,
			Title: "Install Google's NVIDIA driver installer (" + v + ")",
			Why:   fmt.Sprintf("GKE installs no driver on %s, and the GPU operator's driver container does not support GKE's images", strings.Join(nodes, ", ")),
			Release: &Release{Name: name, Namespace: ns, Chart: chart.Name, ChartVersion: chart.Version, Values: values,
				Layers: []Layer{{Source: "detected: GPU nodes on " + v + " without a GKE-installed driver", Values: values}}}})
	}
	return steps
}
