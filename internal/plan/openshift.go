package plan

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
	"time"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/profile"
)

// On OpenShift NVIDIA supports only OLM (NVIDIA/cloud-native-docs openshift/install-gpu-ocp.rst): Red Hat's NFD
// Operator, a NodeFeatureDiscovery instance, then NVIDIA's certified operator, whose ClusterPolicy comes from the
// CSV's alm-examples.
const (
	OLMChart             = "olm-operator"
	OpenShiftNFDNS       = "openshift-nfd"
	OpenShiftOperatorNS  = "nvidia-gpu-operator"
	NFDPackage           = "nfd"
	OperatorPackage      = "gpu-operator-certified"
	OpenShiftPolicyName  = "gpu-cluster-policy"
	nfdOperatorRelease   = "nfd-operator"
	nvidiaOperatorRelase = "gpu-operator-certified"
)

// clusterPolicySections are the ClusterPolicy spec sections (nvidia.com/v1, NVIDIA/gpu-operator
// controllers/clusterpolicy_controller.go@v26.7.0); chart-only keys (platform, nfd, node-feature-discovery,
// extraObjects) have no place in the CR.
var clusterPolicySections = []string{
	"operator", "daemonsets", "driver", "toolkit", "devicePlugin", "dcgm", "dcgmExporter", "gfd", "migManager",
	"mig", "nodeStatusExporter", "validator", "psa", "cdi", "sandboxWorkloads", "vgpuManager", "vgpuDeviceManager",
	"vfioManager", "sandboxDevicePlugin", "kataManager", "ccManager", "gds", "gdrcopy", "hostPaths",
}

// operatorSpecKeys are the keys of ClusterPolicy spec.operator; the chart's operator section also
// holds the Deployment's image and scheduling, which OLM owns here.
var operatorSpecKeys = []string{"defaultRuntime", "runtimeClass", "use_ocp_driver_toolkit", "initContainer", "annotations", "labels"}

// buildOpenShift plans the OLM path.
func buildOpenShift(in Input, p *Plan, prof profile.Profile, o Options) (*Plan, error) {
	det := in.Detection
	p.Namespace = OpenShiftOperatorNS
	olm := in.Charts[OLMChart]

	// The ClusterPolicy takes the profile's and the user's values over the CSV's alm-example.
	overrides := policyOverrides(prof.Values)
	if o.TolerateExistingTaints {
		// Where the Helm path adds them (the detected layer): the operands tolerate the GPU nodes' own
		// taints. The NodeFeatureDiscovery instance stays as NVIDIA's guide writes it; the worker Red
		// Hat's NFD Operator runs is that operator's to configure.
		opTols, _ := existingTaintLayers(det, overrides, map[string]any{})
		overrides = merge(overrides, policyOverrides(opTols.Values))
	}
	for _, f := range o.Files {
		op, _ := split(f.Values)
		overrides = merge(overrides, policyOverrides(op))
	}
	if len(o.Set) > 0 {
		op, _ := split(o.Set)
		overrides = merge(overrides, policyOverrides(op))
	}

	nfdForeign := det.Existing.NFD.Present && !ownSubscription(det.Existing.NFD.OLM, OpenShiftNFDNS, NFDPackage)
	add := func(s Step) { p.Steps = append(p.Steps, s) }
	add(Step{ID: "namespace", Kind: KindObjects, Title: "Namespaces " + OpenShiftNFDNS + " and " + OpenShiftOperatorNS,
		Why: "NVIDIA's OpenShift install puts NFD and the operator in their own namespaces; the operator's is monitored",
		Objects: []map[string]any{
			{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": OpenShiftNFDNS}},
			{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": OpenShiftOperatorNS,
				"labels": map[string]any{"openshift.io/cluster-monitoring": "true"}}},
		}})
	licensing, notes, err := licensingStep(overrides, OpenShiftOperatorNS, o.Licensing, det.Existing)
	if err != nil {
		return nil, err
	}
	p.Warnings = append(p.Warnings, notes...)
	add(licensing)

	nfdSub := Step{ID: "release-" + nfdOperatorRelease, Kind: KindRelease, Title: "Subscribe to Red Hat's NFD Operator",
		Why: "on OpenShift NFD comes from Red Hat's catalog (NVIDIA/cloud-native-docs openshift/install-gpu-ocp.rst)",
		Release: &Release{Name: nfdOperatorRelease, Namespace: OpenShiftNFDNS, Chart: olm.Name, ChartVersion: olm.Version,
			Values: map[string]any{"package": NFDPackage, "source": "redhat-operators", "installPlanApproval": "Automatic"}}}
	nfdSub.Release.Layers = []Layer{{Source: "OpenShift: Red Hat's NFD Operator", Values: nfdSub.Release.Values}}
	nfdCSV := Step{ID: "wait-csv-nfd", Kind: KindWaitCSV, Title: "Wait for the NFD Operator's CSV to succeed", Target: OpenShiftNFDNS + "/" + NFDPackage}
	instance := Step{ID: "nfd-instance", Kind: KindObjects, Title: "NodeFeatureDiscovery nfd-instance",
		Why:     "the NFD Operator runs nfd-master and nfd-worker for this instance; its worker config labels NVIDIA devices by vendor",
		Objects: []map[string]any{nfdInstance()}}
	if nfdForeign {
		reason := "NFD already runs (" + describeNFD(det.Existing.NFD) + ")"
		nfdSub.Skip, nfdSub.Release, nfdCSV.Skip, instance.Skip = reason, nil, reason, reason
	}
	add(nfdSub)
	add(nfdCSV)
	add(instance)
	add(Step{ID: "wait-nfd", Kind: KindWaitNFD, Title: "Wait for NFD to label the GPU nodes",
		Why: "feature.node.kubernetes.io/pci-10de.present=true marks a node with an NVIDIA PCI device"})
	safety := Step{ID: "safety", Kind: KindSafety, Title: "Check what the taint would strand",
		Why: "every GPU DaemonSet must tolerate the taint", Safety: &Safety{}}
	// OLM installs the operator here, so gpuctl has no chart to carry its MutatingAdmissionPolicy: only
	// the API server's own ExtendedResourceToleration can give GPU pods the toleration.
	decision := DecideTaint(det, TaintOptions{Force: o.Taint, NoTaint: o.NoTaint, Own: []string{OpenShiftNFDNS, OpenShiftOperatorNS}})
	taintStep := Step{ID: "taint", Kind: KindTaint, Title: "Taint GPU nodes " + TaintKey + "=" + TaintValue + ":" + TaintEffect,
		Why: "keeps pods that do not ask for GPUs off GPU nodes (" + decision.Why + "); gpuctl records what it added so untaint removes only that" + workloadsWhy(decision.Workloads),
		Taint: &Taint{Key: TaintKey, Value: TaintValue, Effect: TaintEffect, Nodes: p.GPUNodes, Forced: o.Taint,
			Toleration: decision.Toleration, Workloads: decision.Workloads}}
	switch {
	case o.NoTaint:
		safety.Skip, taintStep.Skip, taintStep.Why = "--no-taint: GPU nodes are not tainted", "--no-taint", ""
	case !decision.Taint:
		safety.Skip, taintStep.Skip, taintStep.Why = "GPU nodes are not tainted: "+decision.Skip, decision.Skip, ""
	}
	add(safety)
	add(taintStep)

	// The operator release follows --operator-version here too: NVIDIA's OpenShift guide subscribes to
	// the release's own channel (v26.7) with startingCSV gpu-operator-certified.v26.7.0 and Manual
	// approval (https://docs.nvidia.com/datacenter/cloud-native/openshift/latest/install-gpu-ocp.html).
	version := in.Charts[OperatorRelease].AppVersion
	channel, csv, err := operatorChannel(version)
	if err != nil {
		return nil, err
	}
	if o.Channel != "" {
		// A release line's channel (vX.Y) offers only that line: refuse a mismatch before anything is written.
		if strings.HasPrefix(o.Channel, "v") && strings.Count(o.Channel, ".") == 1 && o.Channel != channel {
			return nil, fmt.Errorf("%w: --channel %s offers only %s.x releases, not operator release %s; use --channel %s or stable, or --operator-version %s.N", ErrInput, o.Channel, o.Channel, version, channel, o.Channel)
		}
		channel = o.Channel
	}
	opValues := map[string]any{"package": OperatorPackage, "source": "certified-operators", "installPlanApproval": "Manual",
		"channel": channel, "startingCSV": csv}
	add(Step{ID: "release-" + nvidiaOperatorRelase, Kind: KindRelease, Title: "Subscribe to NVIDIA's certified GPU Operator " + version,
		Why: "Manual approval, as NVIDIA documents: gpuctl approves exactly the InstallPlan for " + csv,
		Release: &Release{Name: nvidiaOperatorRelase, Namespace: OpenShiftOperatorNS, Chart: olm.Name, ChartVersion: olm.Version,
			Values: opValues, Layers: []Layer{{Source: "OpenShift: NVIDIA's certified operator", Values: opValues}}}})
	add(Step{ID: "approve", Kind: KindApprove, Title: "Approve the GPU Operator's InstallPlan", Target: OpenShiftOperatorNS + "/" + OperatorPackage})
	add(Step{ID: "wait-csv-gpu-operator", Kind: KindWaitCSV, Title: "Wait for the GPU Operator's CSV to succeed", Target: OpenShiftOperatorNS + "/" + OperatorPackage})
	add(Step{ID: "clusterpolicy", Kind: KindClusterPolicy, Title: "ClusterPolicy " + OpenShiftPolicyName,
		Why:    "from the CSV's alm-examples, with the profile's and your values over it (NVIDIA/cloud-native-docs openshift/install-gpu-ocp.rst)",
		Target: OpenShiftOperatorNS + "/" + OperatorPackage, PolicyName: OpenShiftPolicyName, PolicySpec: normalized(overrides)})
	add(Step{ID: "wait-operator", Kind: KindWaitOperator, Title: "Wait for the operator Deployment", Target: OperatorDeployment})
	add(Step{ID: "wait-validators", Kind: KindWaitValidators, Title: "Wait for the validator on every GPU node",
		Why: "nvidia-operator-validator is Ready once driver, toolkit, CUDA and device plugin checks passed on its node"})
	add(Step{ID: "wait-allocatable", Kind: KindWaitAllocatable, Title: "Wait for nvidia.com/gpu to be allocatable"})
	add(Step{ID: "wait-clusterpolicy", Kind: KindWaitPolicy, Title: "Wait for ClusterPolicy " + OpenShiftPolicyName + " to be ready", Target: OpenShiftPolicyName})
	if p.Timeout == 0 {
		p.Timeout = Duration(20 * time.Minute)
	}
	return p, nil
}

// operatorChannel is the OLM channel and CSV of an operator release ("v26.3.3" → "v26.3",
// "gpu-operator-certified.v26.3.3"): NVIDIA publishes one channel per minor release line.
func operatorChannel(version string) (channel, csv string, err error) {
	v, err := semver.NewVersion(version)
	if err != nil || version == "" {
		return "", "", fmt.Errorf("plan: operator release %q is not a version", version)
	}
	return fmt.Sprintf("v%d.%d", v.Major(), v.Minor()), fmt.Sprintf("%s.v%d.%d.%d", OperatorPackage, v.Major(), v.Minor(), v.Patch()), nil
}

// policyOverrides keeps the ClusterPolicy spec sections of chart values.
func policyOverrides(values map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range clusterPolicySections {
		v, ok := values[k]
		if !ok {
			continue
		}
		if k == "operator" {
			m, _ := v.(map[string]any)
			op := map[string]any{}
			for _, ok := range operatorSpecKeys {
				if x, has := m[ok]; has {
					op[ok] = x
				}
			}
			if len(op) == 0 {
				continue
			}
			v = op
		}
		out[k] = cloneValue(v)
	}
	return out
}

// nfdInstance is the NodeFeatureDiscovery NVIDIA's OpenShift guide creates: the worker labels PCI
// devices of the classes the GPU operator needs, by vendor, so GPU nodes get pci-10de.present.
func nfdInstance() map[string]any {
	workerConfig := strings.Join([]string{
		"sources:",
		"  pci:",
		`    deviceClassWhitelist: ["02", "0200", "0207", "0300", "0302"]`,
		"    deviceLabelFields: [vendor]",
	}, "\n") + "\n"
	return map[string]any{
		"apiVersion": "nfd.openshift.io/v1", "kind": "NodeFeatureDiscovery",
		"metadata": map[string]any{"name": "nfd-instance", "namespace": OpenShiftNFDNS},
		"spec": map[string]any{
			"workerConfig": map[string]any{"configData": workerConfig},
		},
	}
}

func ownSubscription(s *detect.Subscription, ns, pkg string) bool {
	return s != nil && s.Namespace == ns && s.Package == pkg
}
