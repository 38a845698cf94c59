package step

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/runner"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// safetyKind checks, once NFD has labelled the GPU nodes, that the taint will strand nothing, and adds
// tolerations where needed (Do).
type safetyKind struct{}

// Do runs once NFD has labelled the GPU nodes, before the operator release and the taint, when
// the GPU nodes are known for sure. It fails when the taint would keep gpuctl's own GPU DaemonSets off
// the GPU nodes (a values override dropped the toleration); where NFD found GPU nodes detection did not
// know, it decides again whether to taint (retaint: not where every schedulable node turns out to be a
// GPU node, and never stranding a workload); it adds the toleration to the operator and NFD master/gc
// when every schedulable worker is a GPU node
// (they tolerate only the control plane, NVIDIA/gpu-operator deployments/gpu-operator/templates/operator.yaml@v26.7.0;
// NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0), and warns about other DaemonSets that run on GPU
// nodes without tolerating the taint.
func (safetyKind) Do(ctx context.Context, x *executor, s *plan.Step, _ func(health.Progress)) (runner.Outcome, error) {
	// NFD may have found GPU nodes detection did not know: decide again whether to taint.
	if skipped, err := x.retaint(ctx, s); err != nil {
		return runner.Outcome{}, err
	} else if skipped != "" {
		x.sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Message: "GPU nodes are not tainted: " + skipped})
		return runner.Outcome{Message: "GPU nodes are not tainted: " + skipped}, nil
	}
	if err := x.overridesTolerate(s); err != nil {
		return runner.Outcome{}, err
	}
	gpuNodes, open, err := x.safetyNodes(ctx)
	if err != nil {
		return runner.Outcome{}, err
	}
	if err := x.reach(s, gpuNodes); err != nil {
		return runner.Outcome{}, err
	}
	var msgs []string
	changed := false
	if len(open) == 0 {
		if changed, err = x.tolerateEverywhere(ctx, s); err != nil {
			return runner.Outcome{}, err
		}
		msgs = append(msgs, "every schedulable worker is a GPU node: the operator and NFD master/gc tolerate the taint")
	} else {
		msgs = append(msgs, fmt.Sprintf("%d schedulable non-GPU workers remain for everything else", len(open)))
	}
	dss, err := x.clients.Kube.AppsV1().DaemonSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return runner.Outcome{}, err
	}
	if stranded := taint.Stranded(dss.Items, gpuNodes, gpuTaint()); len(stranded) > 0 {
		x.sink.Event(event.Event{Time: time.Now(), Type: event.Warning,
			Message: fmt.Sprintf("DaemonSets that run on GPU nodes but do not tolerate the taint: %s; their running pods stay, but new ones will not be scheduled on GPU nodes", strings.Join(stranded, ", ")),
			Hint:    "add a toleration for nvidia.com/gpu to them if they must run on GPU nodes (e.g. log or monitoring agents)"})
		msgs = append(msgs, fmt.Sprintf("%d other DaemonSets would not reach GPU nodes", len(stranded)))
	}
	return runner.Outcome{Message: strings.Join(msgs, "; "), Changed: changed}, nil
}

// Writes: the tolerations it may add, as a rule: whether they are needed is known once NFD has
// labelled the nodes. Tolerations the plan already adds are in the releases' values.
func (safetyKind) Writes(_ context.Context, l *lister, s *plan.Step) error {
	if s.Safety == nil || s.Safety.TolerationsPlanned {
		return nil
	}
	r := "if NFD's labels show that every schedulable worker is a GPU node, the operator"
	if nfd := l.plan.Step(s.Safety.NFDRelease); nfd != nil && nfd.Skip == "" && nfd.Release != nil {
		r += " and NFD master/gc get tolerations of the taint: release " + nfd.Release.Name + " is applied once more with them (one more revision)"
	} else {
		r += " gets a toleration of the taint in its release's values"
	}
	l.w.Rules = append(l.w.Rules, r)
	return nil
}

// State: the check writes nothing itself; the tolerations it decides go into the releases' values.
func (safetyKind) State(context.Context, *executor, *plan.Step) (string, error) {
	return "nothing changed (the check only reads)", nil
}

func (safetyKind) Explained() bool { return false }

// Needs: the nodes, and every DaemonSet, to find those that would not reach the GPU nodes.
func (safetyKind) Needs(*plan.Step, string) []preflight.Access {
	return append(access("", "", "nodes", "get", "list"), access("", "apps", "daemonsets", "list")...)
}

func (safetyKind) Recorded(*plan.Step) (Recorded, error) { return Recorded{}, nil }
func (safetyKind) Rendered(*plan.Step) Rendered          { return Rendered{} }

// Exported: a note; the check needs the cluster at the moment of the taint.
func (safetyKind) Exported(s *plan.Step) Exported {
	if s.Skip != "" {
		return Exported{}
	}
	return Exported{Notes: []string{"gpuctl's run-time check that the taint strands no workload (and the tolerations it adds to the operator and NFD where every schedulable node is a GPU node) is not part of an export: check with `gpuctl check --pre` before tainting"}}
}

// gpuTaint is the taint gpuctl puts on GPU nodes.
func gpuTaint() corev1.Taint {
	return corev1.Taint{Key: plan.TaintKey, Value: plan.TaintValue, Effect: corev1.TaintEffect(plan.TaintEffect)}
}

// overridesTolerate fails when values that replace a chart's default toleration list (the operator's
// daemonsets.tolerations, the NFD worker's) no longer tolerate the taint.
func (x *executor) overridesTolerate(s *plan.Step) error {
	for _, check := range []struct {
		step, what string
		path       []string
	}{
		{s.Safety.OperatorRelease, "the GPU operator's operand DaemonSets (daemonsets.tolerations)", []string{"daemonsets", "tolerations"}},
		{s.Safety.NFDRelease, "the NFD worker DaemonSet (node-feature-discovery.worker.tolerations)", []string{"worker", "tolerations"}},
	} {
		st := x.plan.Step(check.step)
		if st == nil || st.Release == nil {
			continue
		}
		tols, set, err := tolerationsAt(st.Release.Values, check.path...)
		if err != nil {
			return err
		}
		if set && !taint.Tolerates(tols, gpuTaint()) {
			return &runner.StepError{
				Err:  fmt.Errorf("%s would not tolerate %s=%s:%s, so they could not run on the tainted GPU nodes", check.what, plan.TaintKey, plan.TaintValue, plan.TaintEffect),
				Hint: "add {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule} to that list (setting it replaces the default), or install with --no-taint",
			}
		}
	}
	return nil
}

// safetyNodes lists the cluster's nodes and sorts them (sortNodes) by the GPU nodes the run knows.
func (x *executor) safetyNodes(ctx context.Context) (gpuNodes []corev1.Node, open []string, err error) {
	// What this check and reach read of a node: its name, labels, taints and whether it is cordoned.
	nodes, err := kube.ListNodes(ctx, x.clients.Kube, func(n *corev1.Node) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels},
			Spec:       corev1.NodeSpec{Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable},
		}
	})
	if err != nil {
		return nil, nil, err
	}
	gpuNodes, open = sortNodes(nodes, x.gpuNodes)
	return gpuNodes, open, nil
}

// sortNodes picks out the GPU nodes (by name, from gpu) and the open workers: the other nodes where
// ordinary pods still go once the GPU nodes are tainted (schedulable, not the control plane, and
// without a taint of their own that keeps such pods off).
func sortNodes(nodes []*corev1.Node, gpu []string) (gpuNodes []corev1.Node, open []string) {
	isGPU := map[string]bool{}
	for _, n := range gpu {
		isGPU[n] = true
	}
	for _, n := range nodes {
		switch {
		case isGPU[n.Name]:
			gpuNodes = append(gpuNodes, *n)
		case !n.Spec.Unschedulable && !detect.IsControlPlane(n) && !hasBlockingTaint(n.Spec.Taints):
			open = append(open, n.Name)
		}
	}
	return gpuNodes, open
}

// tolerateEverywhere adds the toleration to the operator and the NFD master/gc, for a cluster where
// every schedulable worker is a GPU node, unless the plan did already; NFD, already installed by now,
// has its release applied again. changed: that apply changed the release.
func (x *executor) tolerateEverywhere(ctx context.Context, s *plan.Step) (changed bool, err error) {
	if s.Safety.TolerationsPlanned {
		return false, nil
	}
	// The tolerations join the detected facts, below -f and --set, where the next run's detection
	// puts them: both runs give the same values, so the next one does not upgrade the releases.
	const source = "detected by the safety check: every schedulable worker is a GPU node"
	if op := x.plan.Step(s.Safety.OperatorRelease); op != nil && op.Release != nil {
		op.Release.AddDetectedLayer(plan.Layer{Source: source, Values: s.Safety.OperatorValues})
	}
	if s.Safety.NFDRelease == "" {
		return false, nil
	}
	// NFD is already installed: apply its release again with the tolerations.
	nfd := x.plan.Step(s.Safety.NFDRelease)
	if nfd == nil || nfd.Skip != "" || nfd.Release == nil {
		return false, nil
	}
	nfd.Release.AddDetectedLayer(plan.Layer{Source: source, Values: s.Safety.NFDValues})
	out, err := releaseKind{}.Do(ctx, x, nfd, nil)
	if err != nil {
		return false, err
	}
	return out.Changed, nil
}

// reach fails when a GPU node — NFD may have found ones detection did not know, which preflight could
// not judge — has a taint the operands or the NFD worker do not tolerate: the install would skip it.
func (x *executor) reach(s *plan.Step, nodes []corev1.Node) error {
	var gpu []detect.GPUNode
	for _, n := range nodes {
		gpu = append(gpu, detect.GPUNode{Name: n.Name, Taints: n.Spec.Taints})
	}
	var lines []string
	for _, c := range []struct {
		step, what string
		tols       func(map[string]any) []corev1.Toleration
	}{
		{s.Safety.OperatorRelease, "the GPU operator's operands (daemonsets.tolerations)", plan.OperandTolerations},
		{s.Safety.NFDRelease, "the NFD worker (node-feature-discovery.worker.tolerations)", plan.NFDWorkerTolerations},
	} {
		st := x.plan.Step(c.step)
		if st == nil || st.Release == nil || st.Skip != "" {
			continue
		}
		for _, nt := range plan.Untolerated(gpu, c.tols(st.Release.Values)) {
			lines = append(lines, fmt.Sprintf("GPU node %s has taint %s, which %s do not tolerate", nt.Node, nt.Taint.ToString(), c.what))
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return &runner.StepError{
		Err:  fmt.Errorf("gpuctl's DaemonSets cannot reach every GPU node: %s", strings.Join(lines, "; ")),
		Hint: "run gpuctl install again with --tolerate-existing-taints (NFD's labels now tell detection about these nodes), or remove the taint",
	}
}

// tolerationsAt reads a tolerations list from values; set is false when the values leave the chart's
// default in place.
func tolerationsAt(values map[string]any, path ...string) (tols []corev1.Toleration, set bool, err error) {
	var cur any = values
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		if cur, ok = m[p]; !ok {
			return nil, false, nil
		}
	}
	b, err := json.Marshal(cur)
	if err != nil {
		return nil, true, err
	}
	if err := json.Unmarshal(b, &tols); err != nil {
		return nil, true, fmt.Errorf("values %s: %w", strings.Join(path, "."), err)
	}
	return tols, true, nil
}

// hasBlockingTaint: a NoSchedule or NoExecute taint other than the GPU one keeps ordinary pods off.
func hasBlockingTaint(taints []corev1.Taint) bool {
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}
