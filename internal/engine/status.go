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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
	Name      string `json:"name"`
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
	ns, policy := s.Clients.Namespace, plan.ClusterPolicyName
	if rec != nil && !rec.Uninstalled {
		ns = rec.Namespace
		if rec.Distribution == "openshift" {
			policy = plan.OpenShiftPolicyName
		}
	}
	installed := rec != nil && !rec.Uninstalled
	if !installed {
		// An install from before the record existed: its operator release.
		rc, err := release.New(s.Clients.Getter, ns, nil)
		if err == nil {
			if last, _ := rc.Last(plan.OperatorRelease); last != nil {
				installed = true
			}
		}
	}
	if !installed {
		return &StatusResult{Record: rec, Checks: []StatusCheck{{Name: "install", State: CheckFailed,
			Message: "gpuctl has not installed the GPU stack on this cluster (no install record " + record.Namespace + "/" + record.Name + ")",
			Hint:    "run gpuctl install"}}}, ErrNotInstalled
	}
	if s.Wait > 0 {
		s.wait(ctx, ns, policy)
	}
	return s.read(ctx, rec, ns, policy)
}

// wait waits, with install's watches, for the validators and the ClusterPolicy; its failure is what
// the report then shows.
func (s *Status) wait(ctx context.Context, ns, policy string) {
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
}

func (s *Status) read(ctx context.Context, rec *record.Record, ns, policyName string) (*StatusResult, error) {
	in := statusInputs{record: rec, namespace: ns, policyName: policyName}
	kc := s.Clients.Kube
	d, err := kc.AppsV1().Deployments(ns).Get(ctx, plan.OperatorDeployment, metav1.GetOptions{})
	if err == nil {
		in.operator = d
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read Deployment %s/%s: %w", ns, plan.OperatorDeployment, err)
	}
	if rec == nil || rec.Release(plan.NFDRelease) != nil {
		in.nfdWanted = rec != nil
		if rc, err := release.New(s.Clients.Getter, ns, nil); err == nil {
			in.nfdRelease, _ = rc.Last(plan.NFDRelease)
		}
	}
	cp, err := s.Clients.Dynamic.Resource(health.ClusterPolicyResource()).Get(ctx, policyName, metav1.GetOptions{})
	switch {
	case err == nil:
		in.policy = cp
	case kube.Absent(err):
	default:
		return nil, fmt.Errorf("read ClusterPolicy %s: %w", policyName, err)
	}
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	in.nodes = nodes.Items
	pods, err := kc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app in (" + strings.Join([]string{driverApp, toolkitApp, devicePluginApp, validatorApp}, ",") + ")"})
	if err != nil {
		return nil, fmt.Errorf("list operand pods in %s: %w", ns, err)
	}
	in.pods = pods.Items
	in.monitoring = s.readMonitoring(ctx, rec, ns)
	return evaluateStatus(in), nil
}

// evaluateStatus turns what was read into checks and node rows.
func evaluateStatus(in statusInputs) *StatusResult {
	res := &StatusResult{Installed: true, Record: in.record}
	add := func(name string, state CheckState, msg, hint string) {
		res.Checks = append(res.Checks, StatusCheck{Name: name, State: state, Message: msg, Hint: hint})
	}
	if r := in.record; r != nil {
		msg := fmt.Sprintf("GPU Operator %s, profile %s on %s, by gpuctl %s (%s %s %s)", r.OperatorVersion, r.Profile, r.Distribution,
			r.GpuctlVersion, r.Command, r.Result, r.Updated.Format(time.RFC3339))
		state := CheckOK
		if r.Result != "succeeded" {
			state = CheckWarning
		}
		add("install record", state, msg, "")
	} else {
		add("install record", CheckWarning, "none: installed by a gpuctl without records, or by hand", "gpuctl upgrade and uninstall work from the Helm releases alone")
	}

	switch d := in.operator; {
	case d == nil:
		add("operator", CheckFailed, "Deployment "+in.namespace+"/"+plan.OperatorDeployment+" not found", "run gpuctl install again")
	case deploymentAvailable(d):
		add("operator", CheckOK, fmt.Sprintf("Deployment %s/%s available (%s)", in.namespace, d.Name, operatorImageTag(d)), "")
	default:
		add("operator", CheckFailed, fmt.Sprintf("Deployment %s/%s not available: %d/%d replicas", in.namespace, d.Name, d.Status.AvailableReplicas, deref(d.Spec.Replicas)),
			"kubectl -n "+in.namespace+" describe deployment "+d.Name)
	}

	if in.nfdWanted {
		switch r := in.nfdRelease; {
		case r == nil:
			add("node feature discovery", CheckFailed, "Helm release "+plan.NFDRelease+" not found", "run gpuctl install again")
		case r.Status != "deployed":
			add("node feature discovery", CheckFailed, fmt.Sprintf("Helm release %s revision %d is %s", r.Name, r.Revision, r.Status), "helm history "+r.Name+" -n "+in.namespace)
		default:
			add("node feature discovery", CheckOK, fmt.Sprintf("Helm release %s revision %d deployed (%s)", r.Name, r.Revision, r.AppVersion), "")
		}
	}

	if in.policy == nil {
		add("clusterpolicy", CheckFailed, "ClusterPolicy "+in.policyName+" not found", "run gpuctl install again")
	} else {
		state, _, _ := unstructured.NestedString(in.policy.Object, "status", "state")
		reason, message := "", ""
		conds, _, _ := unstructured.NestedSlice(in.policy.Object, "status", "conditions")
		ready := false
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
				reason, _ = m["reason"].(string)
				message, _ = m["message"].(string)
				ready = m["status"] == "True" && reason == "Reconciled"
			}
		}
		msg := "ClusterPolicy " + in.policyName + " state " + orNone(state)
		if reason != "" {
			msg += " (" + reason
			if message != "" && !ready {
				msg += ": " + message
			}
			msg += ")"
		}
		if state == "ready" && ready {
			add("clusterpolicy", CheckOK, msg, "")
		} else {
			add("clusterpolicy", CheckFailed, msg, "kubectl get clusterpolicy "+in.policyName+" -o yaml shows the operator's conditions")
		}
	}

	res.Nodes = nodeRows(in.nodes, in.pods)
	validated, allocatable := 0, 0
	var notValidated []string
	for _, n := range res.Nodes {
		if n.Validated {
			validated++
		} else {
			notValidated = append(notValidated, n.Name)
		}
		if n.Allocatable > 0 {
			allocatable++
		}
	}
	switch {
	case len(res.Nodes) == 0:
		add("gpu nodes", CheckFailed, "no node is labelled nvidia.com/gpu.present=true", "the operator labels GPU nodes NFD found; kubectl get nodes -L feature.node.kubernetes.io/pci-10de.present")
	case validated < len(res.Nodes):
		add("gpu nodes", CheckFailed, fmt.Sprintf("%d/%d GPU nodes validated; not: %s", validated, len(res.Nodes), strings.Join(notValidated, ", ")),
			"kubectl -n "+in.namespace+" get pods -l app="+validatorApp+" -o wide; gpuctl status --wait waits for them")
	default:
		add("gpu nodes", CheckOK, fmt.Sprintf("%d/%d GPU nodes validated", validated, len(res.Nodes)), "")
	}
	if len(res.Nodes) > 0 {
		if allocatable < len(res.Nodes) {
			add("allocatable", CheckFailed, fmt.Sprintf("nvidia.com/gpu allocatable on %d/%d GPU nodes", allocatable, len(res.Nodes)), "the device plugin registers the GPUs with the kubelet")
		} else {
			add("allocatable", CheckOK, fmt.Sprintf("nvidia.com/gpu allocatable on %d/%d GPU nodes", allocatable, len(res.Nodes)), "")
		}
	}
	// Monitoring's problems are warnings: the GPUs work without it.
	res.Monitoring = in.monitoring
	res.Checks = append(res.Checks, monitoringCheck(in.monitoring, in.namespace))
	res.Healthy = true
	for _, c := range res.Checks {
		if c.State == CheckFailed {
			res.Healthy = false
		}
	}
	return res
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
			DriverUpgradeState: n.Labels[health.DriverUpgradeStateLabel]}
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

func deploymentAvailable(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			return d.Status.AvailableReplicas > 0
		}
	}
	return false
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

func deref(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

func orNone(s string) string {
	if s == "" {
		return "none (the operator has not reported)"
	}
	return s
}
