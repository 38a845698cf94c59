package plan

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/gpuctl/gpuctl/internal/detect"
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

// openShift plans NVIDIA's OLM path: namespaces, Red Hat's NFD Operator and its NodeFeatureDiscovery
// instance, the taint, NVIDIA's certified operator subscribed to the release's channel with Manual
// approval, the ClusterPolicy from its CSV with the profile's and the user's values, then the waits.
func (b *builder) openShift() (*Plan, error) {
	op := b.det.Existing.GPUOperator
	if err := refuseSecondOperator(op, ownSubscription(op.OLM, OpenShiftOperatorNS, OperatorPackage)); err != nil {
		return nil, err
	}
	if len(b.o.Sharing) > 0 {
		return nil, fmt.Errorf("%w: --sharing: not yet on OpenShift, where OLM installs the operator; set devicePlugin.config in the ClusterPolicy values (-f) and label the nodes (docs/sharing.md)", ErrInput)
	}
	if len(b.o.MIG) > 0 {
		return nil, fmt.Errorf("%w: --mig: not yet on OpenShift, where OLM installs the operator; set mig.strategy in the ClusterPolicy values (-f) and label the nodes nvidia.com/mig.config (docs/sharing.md)", ErrInput)
	}
	if b.o.Monitoring {
		b.warn("--monitoring: not used on OpenShift, where gpuctl labels the operator namespace openshift.io/cluster-monitoring=true for OpenShift's own monitoring stack instead")
	}
	b.p.Namespace = OpenShiftOperatorNS
	overrides := b.policyValues()

	b.add(openShiftNamespacesStep())
	if err := b.addLicensing(overrides, OpenShiftOperatorNS); err != nil {
		return nil, err
	}
	b.addNFDOperator()
	b.add(waitNFDStep())
	b.addOpenShiftTaint()
	subscription, err := b.operatorSubscriptionStep()
	if err != nil {
		return nil, err
	}
	b.add(subscription,
		Step{ID: "approve", Kind: KindApprove, Title: "Approve the GPU Operator's InstallPlan", Target: OpenShiftOperatorNS + "/" + OperatorPackage},
		Step{ID: "wait-csv-gpu-operator", Kind: KindWaitCSV, Title: "Wait for the GPU Operator's CSV to succeed", Target: OpenShiftOperatorNS + "/" + OperatorPackage},
		Step{ID: "clusterpolicy", Kind: KindClusterPolicy, Title: "ClusterPolicy " + OpenShiftPolicyName,
			Why:    "from the CSV's alm-examples, with the profile's and your values over it (NVIDIA/cloud-native-docs openshift/install-gpu-ocp.rst)",
			Target: OpenShiftOperatorNS + "/" + OperatorPackage, PolicyName: OpenShiftPolicyName, PolicySpec: normalized(overrides)})
	b.addWaits(OpenShiftPolicyName)
	return b.p, nil
}

// policyValues are what the ClusterPolicy takes over the CSV's alm-example: the ClusterPolicy sections
// of the profile, of tolerations of the GPU nodes' own taints (--tolerate-existing-taints), of the -f
// files and of --set, in that order.
func (b *builder) policyValues() map[string]any {
	overrides := policyOverrides(b.prof.Values)
	if b.o.TolerateExistingTaints {
		// Where the Helm path adds them (the detected layer): the operands tolerate the GPU nodes' own
		// taints. The NodeFeatureDiscovery instance stays as NVIDIA's guide writes it; the worker Red
		// Hat's NFD Operator runs is that operator's to configure.
		opTols, _ := existingTaintLayers(b.det, overrides, map[string]any{})
		overrides = merge(overrides, policyOverrides(opTols.Values))
	}
	for _, f := range b.o.Files {
		op, _ := split(f.Values)
		overrides = merge(overrides, policyOverrides(op))
	}
	if len(b.o.Set) > 0 {
		op, _ := split(b.o.Set)
		overrides = merge(overrides, policyOverrides(op))
	}
	return overrides
}

// openShiftNamespacesStep creates NFD's and the operator's namespaces; the operator's is monitored.
func openShiftNamespacesStep() Step {
	return Step{ID: "namespace", Kind: KindObjects, Title: "Namespaces " + OpenShiftNFDNS + " and " + OpenShiftOperatorNS,
		Why: "NVIDIA's OpenShift install puts NFD and the operator in their own namespaces; the operator's is monitored",
		Objects: []map[string]any{
			{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": OpenShiftNFDNS}},
			{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": OpenShiftOperatorNS,
				"labels": map[string]any{"openshift.io/cluster-monitoring": "true"}}},
		}}
}

// addNFDOperator subscribes to Red Hat's NFD Operator, waits for its CSV and creates the
// NodeFeatureDiscovery instance; all three are skipped where NFD already runs from another install.
func (b *builder) addNFDOperator() {
	olm := b.in.Charts[OLMChart]
	values := map[string]any{"package": NFDPackage, "source": "redhat-operators", "installPlanApproval": "Automatic"}
	subscription := Step{ID: "release-" + nfdOperatorRelease, Kind: KindRelease, Title: "Subscribe to Red Hat's NFD Operator",
		Why: "on OpenShift NFD comes from Red Hat's catalog (NVIDIA/cloud-native-docs openshift/install-gpu-ocp.rst)",
		Release: &Release{Name: nfdOperatorRelease, Namespace: OpenShiftNFDNS, Chart: olm.Name, ChartVersion: olm.Version,
			Values: values, Layers: []Layer{{Source: "OpenShift: Red Hat's NFD Operator", Values: values}}}}
	csv := Step{ID: "wait-csv-nfd", Kind: KindWaitCSV, Title: "Wait for the NFD Operator's CSV to succeed", Target: OpenShiftNFDNS + "/" + NFDPackage}
	instance := Step{ID: "nfd-instance", Kind: KindObjects, Title: "NodeFeatureDiscovery nfd-instance",
		Why:     "the NFD Operator runs nfd-master and nfd-worker for this instance; its worker config labels NVIDIA devices by vendor",
		Objects: []map[string]any{nfdInstance()}}
	if nfd := b.det.Existing.NFD; nfd.Present && !ownSubscription(nfd.OLM, OpenShiftNFDNS, NFDPackage) {
		reason := "NFD already runs (" + describeNFD(nfd) + ")"
		subscription.Skip, subscription.Release, csv.Skip, instance.Skip = reason, nil, reason, reason
	}
	b.add(subscription, csv, instance)
}

// addOpenShiftTaint adds the safety check and the taint, both skipped when the nodes are not tainted.
// OLM installs the operator here, so gpuctl has no chart to carry its MutatingAdmissionPolicy: only
// the API server's own ExtendedResourceToleration can give GPU pods the toleration.
func (b *builder) addOpenShiftTaint() {
	safety := Step{ID: "safety", Kind: KindSafety, Title: "Check what the taint would strand",
		Why: "every GPU DaemonSet must tolerate the taint", Safety: &Safety{}}
	decision := DecideTaint(b.det, TaintOptions{Force: b.o.Taint, NoTaint: b.o.NoTaint, Own: []string{OpenShiftNFDNS, OpenShiftOperatorNS}})
	taint := b.taintStep(decision)
	switch {
	case b.o.NoTaint:
		safety.Skip, taint.Skip, taint.Why = "--no-taint: GPU nodes are not tainted", "--no-taint", ""
	case !decision.Taint:
		safety.Skip, taint.Skip, taint.Why = "GPU nodes are not tainted: "+decision.Skip, decision.Skip, ""
	}
	b.add(safety, taint)
}

// operatorSubscriptionStep subscribes to NVIDIA's certified operator for the operator release the
// charts are loaded for. It refuses a --channel of another release line.
func (b *builder) operatorSubscriptionStep() (Step, error) {
	// The operator release follows --operator-version here too: NVIDIA's OpenShift guide subscribes to
	// the release's own channel (v26.7) with startingCSV gpu-operator-certified.v26.7.0 and Manual
	// approval (https://docs.nvidia.com/datacenter/cloud-native/openshift/latest/install-gpu-ocp.html).
	version := b.in.Charts[OperatorRelease].AppVersion
	channel, csv, err := operatorChannel(version)
	if err != nil {
		return Step{}, err
	}
	if c := b.o.Channel; c != "" {
		// A release line's channel (vX.Y) offers only that line: refuse a mismatch before anything is written.
		if strings.HasPrefix(c, "v") && strings.Count(c, ".") == 1 && c != channel {
			return Step{}, fmt.Errorf("%w: --channel %s offers only %s.x releases, not operator release %s; use --channel %s or stable, or --operator-version %s.N", ErrInput, c, c, version, channel, c)
		}
		channel = c
	}
	olm := b.in.Charts[OLMChart]
	values := map[string]any{"package": OperatorPackage, "source": "certified-operators", "installPlanApproval": "Manual",
		"channel": channel, "startingCSV": csv}
	return Step{ID: "release-" + nvidiaOperatorRelase, Kind: KindRelease, Title: "Subscribe to NVIDIA's certified GPU Operator " + version,
		Why: "Manual approval, as NVIDIA documents: gpuctl approves exactly the InstallPlan for " + csv,
		Release: &Release{Name: nvidiaOperatorRelase, Namespace: OpenShiftOperatorNS, Chart: olm.Name, ChartVersion: olm.Version,
			Values: values, Layers: []Layer{{Source: "OpenShift: NVIDIA's certified operator", Values: values}}}}, nil
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

// ownSubscription: s is the Subscription gpuctl's OpenShift plan makes (package pkg in namespace
// ns), and gpuctl made it: the Helm release that applied it carries gpuctl's release label. One of
// that package that someone created with oc or the console is theirs.
func ownSubscription(s *detect.Subscription, ns, pkg string) bool {
	return s != nil && s.Namespace == ns && s.Package == pkg && s.Gpuctl
}
