package plan

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/distro"
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
	TaintKey    = detect.GPUResource
	TaintValue  = "present"
	TaintEffect = "NoSchedule"
)

// Defaults of Options: the namespace the Helm path installs into (the operator's own chart name, as
// NVIDIA's documentation installs it) and how long an install may take.
const (
	DefaultNamespace = "gpu-operator"
	DefaultTimeout   = 20 * time.Minute
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
	// Namespace to install into ("" = DefaultNamespace; OpenShift's are fixed).
	Namespace string
	// NoTaint skips tainting the GPU nodes.
	NoTaint bool
	// Taint taints the GPU nodes even where gpuctl would not by default (DecideTaint): where every
	// schedulable node is a GPU node, or nothing adds the GPU toleration to pods that request GPUs.
	Taint bool
	// Timeout bounds the run (0 = DefaultTimeout).
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
	// Sharing are the --sharing values (ParseSharing): a values layer above --monitoring, below -f and
	// --set, and the node labels of the pools with a choice of their own; "none" takes gpuctl's off.
	Sharing []string
	// MIG are the --mig values (ParseMIG): a values layer above --sharing, below -f and --set
	// (mig.strategy, MIG manager on), and the nvidia.com/mig.config labels of the chosen pools' nodes;
	// "none" takes gpuctl's labels off.
	MIG []string
	// DRA installs the operator's DRA stack, the GPUCluster (v26.7+, Kubernetes 1.34+), instead of the
	// ClusterPolicy and its device plugin: a values layer above the detected facts, below -f and --set.
	DRA bool
	// Precompiled is --precompiled: "auto" gives each GPU node's kernel the precompiled driver where
	// the registry has its image (Input.Precompiled) and the compiled one elsewhere, a values layer
	// above --mig, below -f and --set.
	Precompiled string
	// Adopt is --adopt: take over the GPU operator Helm release of gpuctl's name that gpuctl did not
	// install (Input.Adopt; the plan warns when there is none).
	Adopt bool
	// AdoptedValues are the values of a release an earlier install adopted, from the install record:
	// layered where Input.Adopt's are (above the detected facts, below gpuctl's flags, -f and --set).
	AdoptedValues *Layer
	// Render: the plan is rendered, never run (template, export): the releases of gpuctl's names are
	// the ones it describes, whoever applied them (a GitOps engine applies export's), so none is
	// refused as someone else's.
	Render bool
	// Offline: the plan is rendered without a cluster (template, export and images with --profile), so
	// no node, pool or GPU is known: a --sharing or --mig choice for a named pool is planned for the
	// pool alone (its config, no node to label) instead of refused as a pool detection does not know.
	Offline bool
	// Registry is --registry: every image of the releases is pulled from this mirror.
	Registry string
	// ImagePullSecrets are --image-pull-secret: the releases' pods pull with these Secrets.
	ImagePullSecrets []string
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
	Bundle *BundleValues
	// Precompiled is what the registry holds for the GPU nodes' kernels (--precompiled auto).
	Precompiled *PrecompiledFacts
	// Adopt is the release --adopt takes over (nil: none).
	Adopt *Adopted
	// ChartImages reads the image values a release would have without the user's layers (the chart's
	// defaults under values, and what a chart's templates default where a release keeps image
	// defaults there), which --registry and --image-pull-secret rewrite. Nil: values alone.
	ChartImages func(r *Release, values map[string]any) (map[string]any, error)
	Options     Options
}

// BundleValues are an operator release's image pins (internal/bundle).
type BundleValues struct {
	Version       string
	Operator, NFD map[string]any
}

// Build makes the install Plan. It refuses what no cluster could take and what this one cannot, then
// plans NVIDIA's OLM path on OpenShift and the Helm path everywhere else.
func Build(in Input) (*Plan, error) {
	b, err := newBuilder(in)
	if err != nil {
		return nil, err
	}
	if err := b.refuseDRA(); err != nil {
		return nil, err
	}
	if err := b.refusePrecompiled(); err != nil {
		return nil, err
	}
	var p *Plan
	if distro.Get(b.p.Distribution).OLM {
		p, err = b.openShift()
	} else {
		p, err = b.refuseStartup(b.helm())
	}
	if err != nil {
		return nil, err
	}
	return p, b.addImageLayers(p)
}

// builder is one Build in progress: its input, the options with their defaults filled in, the chosen
// profile, and the Plan as the steps are added to it.
type builder struct {
	// adoptedLayer is the values layer of a release --adopt takes over, as planned (the record keeps it).
	adoptedLayer *Layer
	in           Input
	det          *detect.Result
	o            Options
	prof         profile.Profile
	p            *Plan
}

// newBuilder refuses options that contradict each other and clusters gpuctl cannot install on, and
// starts the Plan with what holds on every path: the distribution, the GPU nodes, detection's
// warnings and the values profile.
func newBuilder(in Input) (*builder, error) {
	det := in.Detection
	if det == nil {
		return nil, errors.New("plan: no detection result")
	}
	o := withDefaults(in.Options)
	if o.Taint && o.NoTaint {
		return nil, fmt.Errorf("%w: --taint and --no-taint contradict each other: give one of them", ErrInput)
	}
	if det.Autopilot != nil && det.Autopilot.Detected {
		return nil, fmt.Errorf("%w: GKE Autopilot does not allow the GPU operator's privileged DaemonSets (NVIDIA supports GKE Standard only); use a Standard cluster or GKE's own GPU support", ErrUnsupported)
	}
	p := &Plan{
		Distribution:    det.Distribution.Name,
		DistributionWhy: distributionWhy(det.Distribution),
		Namespace:       o.Namespace,
		Timeout:         Duration(o.Timeout),
		Warnings:        slices.Clone(det.Warnings),
		GPUNodes:        gpuNodeNames(det),
	}
	prof, err := chooseProfile(in, p)
	if err != nil {
		return nil, err
	}
	return &builder{in: in, det: det, o: o, prof: prof, p: p}, nil
}

// withDefaults fills in the options left at their zero value.
func withDefaults(o Options) Options {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	return o
}

// gpuNodeNames are the GPU nodes detection found, sorted (nil where there are none).
func gpuNodeNames(det *detect.Result) []string {
	var names []string
	for _, n := range det.GPUNodes {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	return names
}

// add appends a step to the Plan.
func (b *builder) add(steps ...Step) { b.p.Steps = append(b.p.Steps, steps...) }

// warn adds warnings to the Plan.
func (b *builder) warn(warnings ...string) { b.p.Warnings = append(b.p.Warnings, warnings...) }

// refuseSecondOperator refuses to plan next to a GPU operator gpuctl did not install (isOurs is false):
// two operators would fight over the same ClusterPolicy and nodes. gpuctl's own is installed over.
func refuseSecondOperator(op detect.OperatorInstall, isOurs bool) error {
	if !op.Present || isOurs {
		return nil
	}
	return fmt.Errorf("a GPU operator is already installed (%s): gpuctl will not install a second one next to it; uninstall it first, or manage it with the tool that installed it", describeOperator(op))
}

// addLicensing adds the NVIDIA AI Enterprise secrets step for the operator values given (skipped
// where they ask for no vGPU guest driver), and its notes as warnings.
func (b *builder) addLicensing(operatorValues map[string]any, ns string) error {
	licensing, notes, err := licensingStep(operatorValues, ns, b.o.Licensing, b.det.Existing)
	if err != nil {
		return err
	}
	b.warn(notes...)
	b.add(licensing)
	return nil
}

// waitNFDStep waits for NFD's label on the GPU nodes, on both paths.
func waitNFDStep() Step {
	return Step{ID: "wait-nfd", Kind: KindWaitNFD, Title: "Wait for NFD to label the GPU nodes",
		Why: "feature.node.kubernetes.io/pci-10de.present=true marks a node with an NVIDIA PCI device"}
}

// taintStep is the taint of the GPU nodes as decided; each path says why it may be skipped.
func (b *builder) taintStep(decision TaintDecision) Step {
	return Step{ID: "taint", Kind: KindTaint, Title: "Taint GPU nodes " + TaintKey + "=" + TaintValue + ":" + TaintEffect,
		Why: "keeps pods that do not ask for GPUs off GPU nodes (" + decision.Why + "); gpuctl records what it added so untaint removes only that" + workloadsWhy(decision.Workloads),
		Taint: &Taint{Key: TaintKey, Value: TaintValue, Effect: TaintEffect, Nodes: b.p.GPUNodes, Forced: b.o.Taint,
			Toleration: decision.Toleration, Workloads: decision.Workloads}}
}

// addWaits adds the waits that end every install: the operator Deployment, a validator on every GPU
// node, allocatable GPUs, and the ClusterPolicy (named policy) ready.
func (b *builder) addWaits(policy string) {
	b.add(
		Step{ID: "wait-operator", Kind: KindWaitOperator, Title: "Wait for the operator Deployment", Target: OperatorDeployment},
		Step{ID: "wait-validators", Kind: KindWaitValidators, Title: "Wait for the validator on every GPU node",
			Why: "nvidia-operator-validator is Ready once driver, toolkit, CUDA and device plugin checks passed on its node"},
	)
	if b.o.DRA {
		// The DRA validator's pods carry app=nvidia-operator-validator too (manifests/state-dra-validation/
		// 0500_daemonset.yaml at v26.7.0), so wait-validators holds for both stacks.
		b.add(
			Step{ID: "wait-resourceslices", Kind: KindWaitResourceSlices, Title: "Wait for the DRA driver's ResourceSlices on every GPU node",
				Why: "the DRA kubelet plugin publishes the node's GPUs as a ResourceSlice of driver " + DRADriverName + "; the scheduler allocates claims from them"},
			Step{ID: "wait-gpucluster", Kind: KindWaitGPUCluster, Title: "Wait for GPUCluster " + GPUClusterName + " to be ready", Target: GPUClusterName},
		)
		return
	}
	b.add(
		Step{ID: "wait-allocatable", Kind: KindWaitAllocatable, Title: "Wait for nvidia.com/gpu to be allocatable"},
		Step{ID: "wait-clusterpolicy", Kind: KindWaitPolicy, Title: "Wait for ClusterPolicy " + policy + " to be ready", Target: policy},
	)
}

// chooseProfile picks the values profile: --profile when given (with a warning where it is not the
// detected distribution's), else the detected distribution's, and records why in the Plan.
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

// flatten merges layers, lowest precedence first, into the values Helm gets.
func flatten(layers []Layer) map[string]any {
	out := map[string]any{}
	for _, l := range layers {
		out = merge(out, l.Values)
	}
	return out
}

// distributionWhy says in one line why detection chose the distribution: its strongest two signals.
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

// describeOperator names an installed GPU operator by what installed it.
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

// describeNFD names an installed NFD by what installed it, or where it runs.
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
