package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/internal/distro"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// ErrNotInstalled: gpuctl finds no GPU stack it installed (no install record, no gpu-operator release).
var ErrNotInstalled = errors.New("nothing installed")

// Status reads the health of the GPU stack gpuctl installed, in the manner of `linkerd check`: a list of
// checks, each ok, warning or failed, and a table of the GPU nodes. It writes nothing.
type Status struct {
	Clients *kube.Clients
	// Wait, when above zero, waits up to that long for the stack to become healthy (the same watches
	// as install) before reporting.
	Wait time.Duration
	// Sink receives the waits' progress (nil: discarded).
	Sink event.Sink
}

// CheckState is a check's verdict.
type CheckState string

// Check verdicts.
const (
	CheckOK      CheckState = "ok"
	CheckWarning CheckState = "warning"
	CheckFailed  CheckState = "failed"
	// CheckNotInstalled: there is no stack gpuctl installed to check; not a failure (exit 7).
	CheckNotInstalled CheckState = "not-installed"
)

// StatusCheck is one thing status looked at.
type StatusCheck struct {
	Name    string     `json:"name"`
	State   CheckState `json:"state"`
	Message string     `json:"message"`
	Hint    string     `json:"hint,omitempty"`
}

// NodeStatus is one GPU node's row.
type NodeStatus struct {
	Name string `json:"name"`
	// Pool is the node's pool as detection names it (PoolStatus).
	Pool      string `json:"pool,omitempty"`
	Validated bool   `json:"validated"`
	// GPUs and Product are GPU feature discovery's labels (nvidia.com/gpu.count, nvidia.com/gpu.product).
	GPUs    int    `json:"gpus"`
	Product string `json:"product,omitempty"`
	// Allocatable is the node's allocatable nvidia.com/gpu.
	Allocatable int64 `json:"allocatable"`
	// Driver, Toolkit and DevicePlugin are their operand pods' states on the node: Ready, Running,
	// Pending, … or "-" when none runs there (e.g. a host driver).
	Driver       string `json:"driver"`
	Toolkit      string `json:"toolkit"`
	DevicePlugin string `json:"devicePlugin"`
	// Tainted is true when the node carries nvidia.com/gpu=present:NoSchedule.
	Tainted bool `json:"tainted"`
	// DriverUpgradeState is the operator's nvidia.com/gpu-driver-upgrade-state label ("" when unset).
	DriverUpgradeState string `json:"driverUpgradeState,omitempty"`
	// DRA stack only (--dra): DRADriver is the state of the DRA driver's kubelet plugin pod on the
	// node, ResourceSlices and Devices what it publishes for driver gpu.nvidia.com.
	DRADriver      string `json:"draDriver,omitempty"`
	ResourceSlices int    `json:"resourceSlices,omitempty"`
	Devices        int    `json:"devices,omitempty"`
	// DriverUpgradeSkip is true when the node is labelled nvidia.com/gpu-driver-upgrade.skip=true.
	DriverUpgradeSkip bool `json:"driverUpgradeSkip,omitempty"`
	// MIGConfig and MIGConfigState are the node's nvidia.com/mig.config (the mig-parted config MIG
	// manager applies) and nvidia.com/mig.config.state (pending, rebooting, success or failed).
	MIGConfig      string `json:"migConfig,omitempty"`
	MIGConfigState string `json:"migConfigState,omitempty"`
}

// StatusResult is what Status found.
type StatusResult struct {
	// Installed is false when gpuctl finds nothing it installed.
	Installed bool `json:"installed"`
	// Healthy is true when every check passed.
	Healthy bool           `json:"healthy"`
	Record  *record.Record `json:"record,omitempty"`
	Checks  []StatusCheck  `json:"checks"`
	Nodes   []NodeStatus   `json:"nodes"`
	// Pools summarise the GPU nodes by pool: sharing, MIG, the DRA driver and what they advertise.
	Pools []PoolStatus `json:"pools,omitempty"`
	// Monitoring is what the monitoring check found (--monitoring).
	Monitoring *MonitoringStatus `json:"monitoring,omitempty"`
}

// Operand pods' app labels (NVIDIA/gpu-operator assets/state-*/0500_daemonset.yaml@v26.7.0).
const (
	driverApp       = "nvidia-driver-daemonset"
	toolkitApp      = "nvidia-container-toolkit-daemonset"
	devicePluginApp = "nvidia-device-plugin-daemonset"
	validatorApp    = "nvidia-operator-validator"
)

// Run reads the stack's state; with Wait it first waits for it to become healthy.
func (s *Status) Run(ctx context.Context) (*StatusResult, error) {
	rec, err := record.Read(ctx, s.Clients.Kube)
	if err != nil {
		return nil, err
	}
	ns, policy := s.target(rec)
	if !s.installed(rec, ns) {
		return &StatusResult{Record: rec, Checks: []StatusCheck{{Name: "install", State: CheckNotInstalled,
			Message: "gpuctl has not installed the GPU stack on this cluster (no install record " + record.Namespace + "/" + record.Name + ")",
			Hint:    "run gpuctl install"}}}, ErrNotInstalled
	}
	dra, err := s.isDRA(ctx, rec)
	if err != nil {
		return nil, err
	}
	if s.Wait > 0 {
		s.wait(ctx, ns, policy, dra)
	}
	return s.read(ctx, rec, ns, policy, dra)
}

// target is the namespace and ClusterPolicy status looks at: the install record's, or, without a
// current record, the client's namespace and the Helm charts' ClusterPolicy.
func (s *Status) target(rec *record.Record) (namespace, policy string) {
	ns, policy := s.Clients.Namespace, plan.ClusterPolicyName
	if rec != nil && !rec.Uninstalled {
		ns = rec.Namespace
		if distro.Get(rec.Distribution).OLM {
			policy = plan.OpenShiftPolicyName
		}
	}
	return ns, policy
}

// installed decides whether gpuctl installed the stack: a current install record says so, and so does
// the operator's Helm release in ns, which an install from before the record existed left.
func (s *Status) installed(rec *record.Record, ns string) bool {
	if rec != nil && !rec.Uninstalled {
		return true
	}
	rc, err := release.New(s.Clients.Getter, ns, nil)
	if err != nil {
		return false
	}
	last, _ := rc.Last(plan.OperatorRelease)
	return last != nil
}

// wait waits, with install's watches, for the validators and the ClusterPolicy; its failure is what
// the report then shows.
func (s *Status) wait(ctx context.Context, ns, policy string, dra bool) {
	ctx, cancel := context.WithTimeout(ctx, s.Wait)
	defer cancel()
	emit := func(p health.Progress) {
		if s.Sink != nil {
			s.Sink.Event(event.Event{Time: time.Now(), Type: event.StepProgress, Step: "wait", Title: "Wait for the GPU stack", Message: p.Message, Done: p.Done, Total: p.Total})
		}
	}
	w := &health.Waiter{Kube: s.Clients.Kube, Dynamic: s.Clients.Dynamic, OnProgress: emit, Namespace: ns}
	if err := w.DeploymentAvailable(ctx, ns, plan.OperatorDeployment); err != nil {
		return
	}
	nodes, err := w.ValidatorsReady(ctx, ns, nil)
	if err != nil {
		return
	}
	if dra {
		if err := w.ResourceSlicesPublished(ctx, plan.DRADriverName, nodes); err != nil {
			return
		}
		_ = w.GPUClusterReady(ctx, plan.GPUClusterName)
		return
	}
	if err := w.GPUsAllocatable(ctx, nodes); err != nil {
		return
	}
	_ = w.ClusterPolicyReady(ctx, policy)
}

// statusInputs is everything the verdict is computed from (read from the cluster, or given by tests).
type statusInputs struct {
	record     *record.Record
	namespace  string
	operator   *appsv1.Deployment
	nfdRelease *release.Release
	nfdWanted  bool
	policy     *unstructured.Unstructured
	policyName string
	nodes      []corev1.Node
	pods       []corev1.Pod
	monitoring *MonitoringStatus
	// owner is the GitOps engine that manages the stack's releases or ClusterPolicy (nil: none found).
	owner *release.OwnedError
	// dra is a DRA stack: the GPUCluster (nil: not found) and the DRA driver's ResourceSlices are
	// judged instead of the ClusterPolicy and allocatable nvidia.com/gpu.
	dra        bool
	gpuCluster *unstructured.Unstructured
	slices     []resourcev1.ResourceSlice
	// drivers are the NVIDIADrivers, judged where the ClusterPolicy (or the DRA stack) hands them the driver.
	drivers []unstructured.Unstructured
}

// read reads what the checks look at and evaluates them. An object that is not there is a verdict,
// not an error; a read the API server refuses is an error.
func (s *Status) read(ctx context.Context, rec *record.Record, ns, policyName string, dra bool) (*StatusResult, error) {
	in := statusInputs{record: rec, namespace: ns, policyName: policyName, dra: dra}
	var err error
	if in.operator, err = s.readOperator(ctx, ns); err != nil {
		return nil, err
	}
	in.nfdWanted, in.nfdRelease = s.readNFD(rec, ns)
	if dra {
		if err := s.readDRA(ctx, &in); err != nil {
			return nil, err
		}
	} else if in.policy, err = s.readPolicy(ctx, policyName); err != nil {
		return nil, err
	}
	nodes, err := s.Clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	in.nodes = nodes.Items
	if in.drivers, err = s.readNVIDIADrivers(ctx); err != nil {
		return nil, err
	}
	pods, err := s.Clients.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app in (" + strings.Join([]string{driverApp, toolkitApp, devicePluginApp, validatorApp, draKubeletPluginApp}, ",") + ")"})
	if err != nil {
		return nil, fmt.Errorf("list operand pods in %s: %w", ns, err)
	}
	in.pods = pods.Items
	in.monitoring = s.readMonitoring(ctx, rec, ns)
	// Who manages the stack is shown, not judged: a read the user may not make leaves it unsaid.
	in.owner, _ = findOwned(ctx, s.Clients, installTargets(nil, ns))
	return evaluateStatus(in), nil
}

// readOperator reads the operator Deployment; nil when there is none.
func (s *Status) readOperator(ctx context.Context, ns string) (*appsv1.Deployment, error) {
	d, err := s.Clients.Kube.AppsV1().Deployments(ns).Get(ctx, plan.OperatorDeployment, metav1.GetOptions{})
	switch {
	case err == nil:
		return d, nil
	case apierrors.IsNotFound(err):
		return nil, nil
	}
	return nil, fmt.Errorf("read Deployment %s/%s: %w", ns, plan.OperatorDeployment, err)
}

// readNFD decides whether NFD's release is checked (the record lists it; without a record it is shown
// when found) and reads its last revision.
func (s *Status) readNFD(rec *record.Record, ns string) (wanted bool, last *release.Release) {
	if rec != nil && rec.Release(plan.NFDRelease) == nil {
		return false, nil
	}
	if rc, err := release.New(s.Clients.Getter, ns, nil); err == nil {
		last, _ = rc.Last(plan.NFDRelease)
	}
	return rec != nil, last
}

// readPolicy reads the ClusterPolicy; nil when there is none or its CRD is not served.
func (s *Status) readPolicy(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	cp, err := s.Clients.Dynamic.Resource(health.ClusterPolicyResource()).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return cp, nil
	case kube.Absent(err):
		return nil, nil
	}
	return nil, fmt.Errorf("read ClusterPolicy %s: %w", name, err)
}

// evaluateStatus turns what was read into checks and node rows, in the order status prints them.
// Monitoring's problems are warnings: the GPUs work without it.
func evaluateStatus(in statusInputs) *StatusResult {
	res := &StatusResult{Installed: true, Record: in.record, Monitoring: in.monitoring}
	res.Nodes = nodeRows(in.nodes, in.pods)
	if in.dra {
		addDRANodeState(res.Nodes, in.pods, in.slices)
	}
	res.Pools = poolRows(in.nodes, res.Nodes, in.dra)
	res.Checks = []StatusCheck{recordCheck(in.record, in.owner), operatorCheck(in.operator, in.namespace)}
	if in.nfdWanted {
		res.Checks = append(res.Checks, nfdCheck(in.nfdRelease, in.namespace))
	}
	switch {
	case in.dra:
		res.Checks = append(res.Checks, gpuClusterCheck(in.gpuCluster), gpuNodesCheck(res.Nodes, in.namespace))
		if len(res.Nodes) > 0 {
			res.Checks = append(res.Checks, resourceSlicesCheck(res.Nodes, in.namespace), driverUpgradeCheck(res.Nodes, in.namespace))
		}
	default:
		res.Checks = append(res.Checks, policyCheck(in.policy, in.policyName), gpuNodesCheck(res.Nodes, in.namespace))
		if len(res.Nodes) > 0 {
			res.Checks = append(res.Checks, allocatableCheck(res.Nodes), driverUpgradeCheck(res.Nodes, in.namespace))
		}
	}
	if len(in.drivers) > 0 && len(res.Nodes) > 0 && driversHandedOver(in.policy, in.dra) {
		res.Checks = append(res.Checks, nvidiaDriversCheck(in.drivers, in.nodes, res.Nodes, in.namespace))
	}
	if hasMIGState(res.Nodes) {
		res.Checks = append(res.Checks, migCheck(res.Nodes, in.namespace))
	}
	res.Checks = append(res.Checks, monitoringCheck(in.monitoring, in.namespace))
	res.Healthy = !slices.ContainsFunc(res.Checks, func(c StatusCheck) bool { return c.State == CheckFailed })
	return res
}

// recordCheck shows the install record; an install that did not succeed, or one without a record, is a
// warning (upgrade and uninstall still work from the Helm releases). A stack a GitOps engine manages
// says so instead: its releases are the engine's, which gpuctl's upgrade and uninstall refuse to write.
func recordCheck(r *record.Record, owner *release.OwnedError) StatusCheck {
	c := StatusCheck{Name: "install record", State: CheckOK}
	if owner != nil {
		c.Message = owner.Object + " is managed by " + owner.Owner.String()
		c.Hint = "change it there; gpuctl upgrade and uninstall refuse it (gpuctl export --for " + owner.Owner.ExportFor() + " writes it)"
		if r == nil {
			c.Message = "none: " + c.Message
		}
		return c
	}
	if r == nil {
		c.State, c.Message, c.Hint = CheckWarning, "none: installed by a gpuctl without records, or by hand", "gpuctl upgrade and uninstall work from the Helm releases alone"
		return c
	}
	c.Message = fmt.Sprintf("GPU Operator %s, profile %s on %s, by gpuctl %s (%s %s %s)", r.OperatorVersion, r.Profile, r.Distribution,
		r.GpuctlVersion, r.Command, r.Result, r.Updated.Format(time.RFC3339))
	if r.Result != "succeeded" {
		c.State = CheckWarning
	}
	return c
}

// operatorCheck: the operator Deployment is available as install's wait means it
// (health.DeploymentAvailable), so status and install agree.
func operatorCheck(d *appsv1.Deployment, ns string) StatusCheck {
	c := StatusCheck{Name: "operator", State: CheckFailed}
	if d == nil {
		c.Message, c.Hint = "Deployment "+ns+"/"+plan.OperatorDeployment+" not found", "run gpuctl install again"
		return c
	}
	if ok, why := health.DeploymentAvailable(d); !ok {
		c.Message, c.Hint = fmt.Sprintf("Deployment %s/%s not available: %s", ns, d.Name, why), "kubectl -n "+ns+" describe deployment "+d.Name
		return c
	}
	c.State, c.Message = CheckOK, fmt.Sprintf("Deployment %s/%s available (%s)", ns, d.Name, operatorImageTag(d))
	return c
}

// nfdCheck: NFD's Helm release (nil: not found) is deployed.
func nfdCheck(r *release.Release, ns string) StatusCheck {
	c := StatusCheck{Name: "node feature discovery", State: CheckFailed}
	switch {
	case r == nil:
		c.Message, c.Hint = "Helm release "+plan.NFDRelease+" not found", "run gpuctl install again"
	case r.Status != "deployed":
		c.Message, c.Hint = fmt.Sprintf("Helm release %s revision %d is %s", r.Name, r.Revision, r.Status), "helm history "+r.Name+" -n "+ns
	default:
		c.State, c.Message = CheckOK, fmt.Sprintf("Helm release %s revision %d deployed (%s)", r.Name, r.Revision, r.AppVersion)
	}
	return c
}

// policyCheck: the ClusterPolicy (nil: not found) is ready as install's wait means it
// (health.ClusterPolicyStatus.Ready: state ready and a Ready condition True with reason Reconciled).
func policyCheck(policy *unstructured.Unstructured, name string) StatusCheck {
	c := StatusCheck{Name: "clusterpolicy", State: CheckFailed}
	if policy == nil {
		c.Message, c.Hint = "ClusterPolicy "+name+" not found", "run gpuctl install again"
		return c
	}
	st := health.ReadClusterPolicyStatus(policy)
	c.Message = "ClusterPolicy " + name + " state " + stateOrUnreported(st.State)
	if st.ReadyReason != "" {
		c.Message += " (" + st.ReadyReason
		if st.ReadyMessage != "" && !st.Reconciled() {
			c.Message += ": " + st.ReadyMessage
		}
		c.Message += ")"
	}
	if st.Ready() {
		c.State = CheckOK
	} else {
		c.Hint = "kubectl get clusterpolicy " + name + " -o yaml shows the operator's conditions"
	}
	return c
}

// stateOrUnreported is the ClusterPolicy's status.state, or says the operator has not written one.
func stateOrUnreported(state string) string {
	if state == "" {
		return "none (the operator has not reported)"
	}
	return state
}

// gpuNodesCheck: there are GPU nodes, and a validator pod is Ready on each.
func gpuNodesCheck(nodes []NodeStatus, ns string) StatusCheck {
	c := StatusCheck{Name: "gpu nodes", State: CheckFailed}
	var notValidated []string
	for _, n := range nodes {
		if !n.Validated {
			notValidated = append(notValidated, n.Name)
		}
	}
	validated := len(nodes) - len(notValidated)
	switch {
	case len(nodes) == 0:
		c.Message = "no node is labelled nvidia.com/gpu.present=true"
		c.Hint = "the operator labels GPU nodes NFD found; kubectl get nodes -L feature.node.kubernetes.io/pci-10de.present"
	case len(notValidated) > 0:
		c.Message = fmt.Sprintf("%d/%d GPU nodes validated; not: %s", validated, len(nodes), strings.Join(notValidated, ", "))
		c.Hint = "kubectl -n " + ns + " get pods -l app=" + validatorApp + " -o wide; gpuctl status --wait waits for them"
	default:
		c.State, c.Message = CheckOK, fmt.Sprintf("%d/%d GPU nodes validated", validated, len(nodes))
	}
	return c
}

// allocatableCheck: every GPU node has nvidia.com/gpu allocatable.
func allocatableCheck(nodes []NodeStatus) StatusCheck {
	allocatable := 0
	for _, n := range nodes {
		if n.Allocatable > 0 {
			allocatable++
		}
	}
	c := StatusCheck{Name: "allocatable", State: CheckOK, Message: fmt.Sprintf("nvidia.com/gpu allocatable on %d/%d GPU nodes", allocatable, len(nodes))}
	if allocatable < len(nodes) {
		c.State, c.Hint = CheckFailed, "the device plugin registers the GPUs with the kubelet"
	}
	return c
}

// nodeRows builds the per-GPU-node table: nodes the operator labelled nvidia.com/gpu.present=true.
func nodeRows(nodes []corev1.Node, pods []corev1.Pod) []NodeStatus {
	podState := map[string]map[string]string{} // app → node → state
	for i := range pods {
		p := &pods[i]
		app := p.Labels["app"]
		if podState[app] == nil {
			podState[app] = map[string]string{}
		}
		podState[app][p.Spec.NodeName] = podPhase(p)
	}
	state := func(app, node string) string {
		if s, ok := podState[app][node]; ok {
			return s
		}
		return "-"
	}
	var out []NodeStatus
	for i := range nodes {
		n := &nodes[i]
		if n.Labels[health.GPUPresentLabel] != "true" {
			continue
		}
		row := NodeStatus{Name: n.Name, Product: n.Labels["nvidia.com/gpu.product"],
			Driver: state(driverApp, n.Name), Toolkit: state(toolkitApp, n.Name), DevicePlugin: state(devicePluginApp, n.Name),
			DriverUpgradeState: n.Labels[health.DriverUpgradeStateLabel], DriverUpgradeSkip: n.Labels[driverUpgradeSkipLabel] == "true",
			MIGConfig: n.Labels[plan.MIGLabel], MIGConfigState: n.Labels[plan.MIGStateLabel]}
		row.GPUs, _ = strconv.Atoi(n.Labels["nvidia.com/gpu.count"])
		if q, ok := n.Status.Allocatable["nvidia.com/gpu"]; ok {
			row.Allocatable = q.Value()
		}
		row.Validated = state(validatorApp, n.Name) == "Ready"
		for _, t := range n.Spec.Taints {
			if t.Key == taint.GPUTaint.Key && t.Effect == taint.GPUTaint.Effect {
				row.Tainted = true
			}
		}
		out = append(out, row)
	}
	slices.SortFunc(out, func(a, b NodeStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// podPhase is a pod's state in one word: Ready, or its phase, or a waiting container's reason.
func podPhase(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "Terminating"
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return "Ready"
		}
	}
	for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "PodInitializing" {
			return w.Reason
		}
	}
	if p.Status.Phase == "" {
		return string(corev1.PodPending)
	}
	return string(p.Status.Phase)
}

func operatorImageTag(d *appsv1.Deployment) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		if i := strings.LastIndex(c.Image, ":"); i >= 0 && !strings.Contains(c.Image[i:], "/") {
			return c.Image[i+1:]
		}
		return c.Image
	}
	return "no container"
}
