package step

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// tolerationWait bounds the wait for gpuctl's MutatingAdmissionPolicy to be in force: the API server
// loads a new policy and its binding within seconds.
const tolerationWait = 2 * time.Minute

// waitToleration is the kind that waits until gpuctl's MutatingAdmissionPolicy is in force.
func waitToleration() Kind {
	return waiting{do: func(ctx context.Context, x *executor, _ *plan.Step, progress func(health.Progress)) (runner.Outcome, error) {
		return x.waitToleration(ctx, progress)
	}, needs: func(*plan.Step, string) []preflight.Access {
		// gpuctl's MutatingAdmissionPolicy and its binding come with the operator release, rendered only
		// where the cluster serves them (which an offline render cannot see), and the wait dry-runs a GPU
		// pod (detect.ProbeGPUToleration).
		var out []preflight.Access
		for _, r := range []string{"mutatingadmissionpolicies", "mutatingadmissionpolicybindings"} {
			out = append(out, access("", "admissionregistration.k8s.io", r, "get", "create", "patch", "update")...)
		}
		return append(out, access(detect.ProbeNamespace, "", "pods", "create")...)
	}}
}

// waitToleration waits until the API server adds the GPU toleration to a pod that requests GPUs, so that
// the taint lands only once gpuctl's MutatingAdmissionPolicy (installed with the operator release) is in
// force: a GPU pod created in between would otherwise never tolerate it. The probe's pod goes without
// its label, which the policy otherwise leaves alone (detect.ProbeLabel).
func (x *executor) waitToleration(ctx context.Context, progress func(health.Progress)) (runner.Outcome, error) {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, tolerationWait, true, func(ctx context.Context) (bool, error) {
		added, err := detect.ProbeGPUToleration(ctx, x.clients.Kube, func(p *corev1.Pod) { delete(p.Labels, detect.ProbeLabel) })
		if apierrors.IsForbidden(err) {
			return false, err
		}
		if err != nil {
			last = err
			progress(health.Progress{Message: err.Error()})
			return false, nil
		}
		if !added {
			progress(health.Progress{Message: "a pod that requests GPUs does not get the toleration yet"})
		}
		return added, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return runner.Outcome{}, ctx.Err()
		}
		if apierrors.IsForbidden(err) {
			return runner.Outcome{}, &runner.StepError{Err: err, Hint: "nothing is tainted yet; gpuctl needs to create pods (with dryRun) in namespace " + detect.ProbeNamespace + " to see that its policy is in force (docs/rbac.yaml), or install with --no-taint"}
		}
		msg := fmt.Sprintf("after %s a pod that requests %s still does not get the toleration from gpuctl's MutatingAdmissionPolicy", tolerationWait, detect.GPUResource)
		if last != nil {
			msg += ": " + last.Error()
		}
		return runner.Outcome{}, &runner.StepError{Err: errors.New(msg),
			Hint: "nothing is tainted yet; see kubectl get mutatingadmissionpolicies,mutatingadmissionpolicybindings gpuctl-gpu-toleration, or install with --no-taint"}
	}
	return runner.Outcome{Message: "pods that request GPUs get the toleration"}, nil
}

// retaint decides again whether to taint once NFD has labelled the GPU nodes, when they are not the
// ones detection knew (on a fresh cluster detection sees no GPU node at all): the run then detects again
// and applies plan.DecideTaint to what it finds. Where gpuctl would not have tainted by default had it
// known, the taint (and the wait for gpuctl's policy) is dropped and the operator release goes without
// the policy, so that the next run's plan gives the same values. A workload the taint would strand
// stops the run before the taint.
func (x *executor) retaint(ctx context.Context, s *plan.Step) (skipped string, err error) {
	ts := x.plan.Step("taint")
	if ts == nil || ts.Skip != "" || ts.Taint == nil || sameNodes(x.plan.GPUNodes, x.gpuNodes) {
		return "", nil
	}
	det, err := detect.Run(ctx, detect.From(x.clients))
	if err != nil {
		return "", err
	}
	own := []string{x.plan.Namespace}
	if s.Safety.OperatorRelease == "" {
		own = append(own, plan.OpenShiftNFDNS, plan.OpenShiftOperatorNS)
	}
	d := plan.DecideTaint(det, plan.TaintOptions{Force: ts.Taint.Forced, PolicyAvailable: s.Safety.OperatorRelease != "", Own: own})
	if !d.Taint {
		ts.Skip = d.Skip
		if w := x.plan.Step("wait-toleration"); w != nil && w.Skip == "" {
			w.Skip = "GPU nodes are not tainted"
		}
		if op := x.plan.Step(s.Safety.OperatorRelease); op != nil && op.Release != nil {
			if _, set := op.Release.Values[plan.PolicyValue]; set {
				op.Release.AddDetectedLayer(plan.Layer{Source: "detected by the safety check: GPU nodes are not tainted", Values: map[string]any{plan.PolicyValue: nil}})
			}
		}
		return d.Skip, nil
	}
	ts.Taint.Workloads = d.Workloads
	if len(d.Stranded) > 0 {
		return "", &runner.StepError{Err: errors.New(plan.StrandedMessage(d.Stranded)), Hint: "nothing is tainted yet; " + plan.StrandedHint}
	}
	return "", nil
}

// sameNodes reports whether a and b name the same nodes, in any order.
func sameNodes(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
