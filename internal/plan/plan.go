package plan

import (
	"fmt"
	"time"
)

// Kind is what a step does; the engine has one executor per kind.
type Kind string

const (
	// KindObjects server-side applies Objects (the namespace, platform prerequisites).
	KindObjects Kind = "objects"
	// KindSecrets creates Secrets from local inputs the engine reads (NVAIE licensing).
	KindSecrets Kind = "secrets"
	// KindCRDs server-side applies the CRDs of the named charts, never downgrading.
	KindCRDs Kind = "crds"
	// KindRelease installs or upgrades a Helm release of an embedded chart.
	KindRelease Kind = "release"
	// KindWaitNFD waits until NFD has labelled the GPU nodes with their NVIDIA PCI label.
	KindWaitNFD Kind = "wait-nfd"
	// KindSafety checks that the taint will not strand anything, and adds tolerations where needed.
	KindSafety Kind = "safety"
	// KindTaint taints the GPU nodes.
	KindTaint Kind = "taint"
	// KindWaitToleration waits until the API server adds the GPU toleration to a pod that requests GPUs
	// (gpuctl's MutatingAdmissionPolicy is in force).
	KindWaitToleration Kind = "wait-toleration"
	// KindWaitOperator waits for the operator Deployment to be Available.
	KindWaitOperator Kind = "wait-operator"
	// KindWaitValidators waits for a Ready nvidia-operator-validator pod on every GPU node.
	KindWaitValidators Kind = "wait-validators"
	// KindWaitAllocatable waits for nvidia.com/gpu to be allocatable on every GPU node.
	KindWaitAllocatable Kind = "wait-allocatable"
	// KindWaitPolicy waits for the ClusterPolicy to be ready with reason Reconciled.
	KindWaitPolicy Kind = "wait-clusterpolicy"
	// KindWaitGPUCluster waits for the GPUCluster (--dra) to be ready with reason Reconciled.
	KindWaitGPUCluster Kind = "wait-gpucluster"
	// KindWaitResourceSlices waits for a ResourceSlice of the DRA driver on every GPU node (--dra).
	KindWaitResourceSlices Kind = "wait-resourceslices"
	// KindWaitCSV waits until an OLM Subscription's installed ClusterServiceVersion has Succeeded.
	KindWaitCSV Kind = "wait-csv"
	// KindApprove approves the InstallPlan of a Manual OLM Subscription for the CSV its channel names.
	KindApprove Kind = "approve-installplan"
	// KindClusterPolicy applies the ClusterPolicy from the installed CSV's alm-examples with overrides.
	KindClusterPolicy Kind = "clusterpolicy"
	// KindPSP binds the privileged PodSecurityPolicy where the cluster still serves PSP.
	KindPSP Kind = "psp"
	// KindNodeLabels sets gpuctl's node labels (--sharing: nvidia.com/device-plugin.config per pool;
	// --mig: nvidia.com/mig.config).
	KindNodeLabels Kind = "node-labels"
)

// Plan is what gpuctl will do, in order. It is data: --dry-run prints it, the wizard shows it for
// confirmation, CI reviews it as JSON, and the engine executes it.
type Plan struct {
	// Distribution is the detected (or assumed) distribution; DistributionWhy says why in one line.
	Distribution    string `json:"distribution"`
	DistributionWhy string `json:"distributionWhy"`
	// Profile is the values profile in use; ProfileWhy says why it was chosen.
	Profile    string `json:"profile"`
	ProfileWhy string `json:"profileWhy"`
	Namespace  string `json:"namespace"`
	// GPUNodes are the GPU nodes known before NFD runs (NFD may find more; the engine uses what it finds).
	GPUNodes []string `json:"gpuNodes"`
	// Drivers are the driver each GPU node gets, where the plan chooses per node (--precompiled auto).
	Drivers []NodeDriver `json:"drivers,omitempty"`
	// Adoption is the release --adopt takes over: what of it the install keeps and changes.
	Adoption *Adoption `json:"adoption,omitempty"`
	// Warnings are things to know before confirming.
	Warnings []string `json:"warnings,omitempty"`
	// Timeout bounds the whole run.
	Timeout Duration `json:"timeout"`
	Steps   []Step   `json:"steps"`
	// Writes is every write the run makes, as --dry-run lists it (nil otherwise).
	Writes *Writes `json:"writes,omitempty"`
}

// Step is one thing to do.
type Step struct {
	// ID is stable across runs ("crds", "release-gpu-operator", …); events carry it.
	ID    string `json:"id"`
	Kind  Kind   `json:"kind"`
	Title string `json:"title"`
	// Why is the reason for the step, or the fact behind a choice it makes.
	Why string `json:"why,omitempty"`
	// Skip, when set, says why the step will not run.
	Skip string `json:"skip,omitempty"`

	// Objects for KindObjects, as plain maps (Kubernetes objects).
	Objects []map[string]any `json:"objects,omitempty"`
	// Secrets for KindSecrets: what to create and from which inputs (never the contents).
	Secrets []SecretSpec `json:"secrets,omitempty"`
	// Charts for KindCRDs: the embedded charts whose crds/ are applied.
	Charts []string `json:"charts,omitempty"`
	// ChartReleases for KindCRDs: the upstream release each chart is loaded for, where that is not
	// the chart's own (the gpu-operator chart carries each operator release's CRDs).
	ChartReleases map[string]string `json:"chartReleases,omitempty"`
	// Release for KindRelease.
	Release *Release `json:"release,omitempty"`
	// Taint for KindTaint: the taint and the nodes known now.
	Taint *Taint `json:"taint,omitempty"`
	// Safety for KindSafety.
	Safety *Safety `json:"safety,omitempty"`
	// Labels for KindNodeLabels.
	Labels *NodeLabels `json:"labels,omitempty"`
	// Target names what a wait step waits for (a Deployment, a ClusterPolicy, "namespace/subscription").
	Target string `json:"target,omitempty"`
	// PolicyName and PolicySpec for KindClusterPolicy: the name to give the alm-example, and the spec
	// values merged over it.
	PolicyName string         `json:"policyName,omitempty"`
	PolicySpec map[string]any `json:"policySpec,omitempty"`
}

// Release is a Helm release to apply.
type Release struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Chart is the embedded chart's name and version.
	Chart        string `json:"chart"`
	ChartVersion string `json:"chartVersion"`
	// AppVersion is the upstream release the chart is loaded for (its templates and CRDs branch on
	// it): the chart's own appVersion, or the operator release chosen with --operator-version.
	AppVersion string `json:"appVersion,omitempty"`
	// Values are the user-supplied values Helm gets (the chart's defaults stay in the chart).
	Values map[string]any `json:"values"`
	// Layers are where the values came from, lowest precedence first.
	Layers []Layer `json:"layers"`
	// KeepSubchart, on the operator release of an adopted release that ran NFD as its subchart, keeps
	// that NFD running as it is through the release's upgrade (KeptSubchart).
	KeepSubchart *KeptSubchart `json:"keepSubchart,omitempty"`
}

// KeptFromAnnotation marks the objects a KeptSubchart kept, with the release they were kept from.
const KeptFromAnnotation = "gpuctl.io/kept-from"

// KeptSubchart: before the upgrade of release Release (in Namespace) with gpuctl's chart, which does
// not render NVIDIA's subchart Chart, each object of that subchart the release's deployed manifest
// has gets helm.sh/resource-policy: keep, which the upgrade honours instead of deleting it
// (helm.sh/helm/v4 v4.3.1 pkg/kube/client.go, Update). The subchart's NFD goes on as it ran, outside
// any release: gpuctl cannot move it into a release of its own in place, as a DaemonSet's selector
// names its release and cannot change, and a second NFD beside it would fight over the nodes'
// NodeFeatures, whose deletion makes NFD take the nodes' labels off.
type KeptSubchart struct {
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
	Chart     string `json:"chart"`
}

// Layer is one source of values.
type Layer struct {
	// Source is "profile gke", "detected: …", "file values.yaml", "--set".
	Source string         `json:"source"`
	Values map[string]any `json:"values"`
}

// Taint is the taint step's data.
type Taint struct {
	Key    string   `json:"key"`
	Value  string   `json:"value"`
	Effect string   `json:"effect"`
	Nodes  []string `json:"nodes"`
	// Forced is --taint: the run-time safety check does not drop the taint when it finds, once NFD has
	// labelled the GPU nodes, that every schedulable node is one.
	Forced bool `json:"forced,omitempty"`
	// Toleration says how pods that request GPUs get the toleration: TolerationPlugin, TolerationPolicy,
	// or "" (they must carry it themselves).
	Toleration string `json:"toleration,omitempty"`
	// Workloads are those running today whose pods do not tolerate the taint, and what it does to them.
	Workloads []TaintWorkload `json:"workloads,omitempty"`
}

// Safety is the safety check's data: what must tolerate the taint, and the values that add the
// toleration to the operator and NFD master/gc if the check finds that every schedulable worker is a
// GPU node (which may only be known once NFD has labelled the nodes).
type Safety struct {
	// TolerationsPlanned is true when the plan already adds the tolerations (known before NFD).
	TolerationsPlanned bool `json:"tolerationsPlanned"`
	// OperatorValues and NFDValues are merged over the releases' values when tolerations are needed.
	OperatorValues map[string]any `json:"operatorValues"`
	NFDValues      map[string]any `json:"nfdValues"`
	// NFDRelease and OperatorRelease are the step IDs those values go to.
	NFDRelease      string `json:"nfdRelease"`
	OperatorRelease string `json:"operatorRelease"`
}

// Duration marshals as a Go duration string ("20m0s").
type Duration time.Duration

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("duration %q: %w", b, err)
	}
	*d = Duration(v)
	return nil
}

// Step returns the step with the given ID, or nil.
func (p *Plan) Step(id string) *Step {
	for i := range p.Steps {
		if p.Steps[i].ID == id {
			return &p.Steps[i]
		}
	}
	return nil
}

// String is the Go duration form.
func (d Duration) String() string { return time.Duration(d).String() }
