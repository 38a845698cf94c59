package engine

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// unschedulablePrefix marks a pending pod's reason as the scheduler's: the outcome is unschedulable,
// not timeout, when the wait ends on it.
const unschedulablePrefix = "unschedulable: "

// wait watches the run's pods until each has a verdict or the timeout passes, reporting each change
// as progress. An unschedulable pod is no verdict yet: the scheduler retries, and a GPU busy with
// another pod frees up.
func (r *verifyRun) wait(ctx context.Context, progress func(health.Progress)) error {
	wctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	lw := podListWatch(r.v.Clients.Kube, r.pods, labels.Set{VerifyRunLabel: r.p.RunID}.String())
	_, err := watchtools.UntilWithSync(wctx, lw, &corev1.Pod{}, nil, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			return false, nil
		}
		c := r.created[p.Name]
		if c == nil || c.nv.Outcome != "" || p.UID != c.uid {
			return false, nil
		}
		nv, before := c.nv, c.nv.Reason
		if ev.Type == watch.Deleted {
			nv.Outcome, nv.Reason = VerifyFailed, "the pod was deleted before it finished"
		} else {
			nv.Outcome, nv.Reason = podVerdict(p)
		}
		if nv.Outcome != "" {
			nv.Duration = plan.Duration(time.Since(c.started).Round(time.Millisecond))
		}
		done, pending := r.progress()
		if nv.Outcome != "" || nv.Reason != before {
			progress(health.Progress{Message: progressMessage(nv), Done: done, Total: len(r.created), Pending: pending})
		}
		return done == len(r.created), nil
	})
	if err != nil && wctx.Err() != nil {
		// watchtools reports any end of its context as "timed out waiting for the condition".
		return wctx.Err()
	}
	return err
}

// progress counts the pods with a verdict and names the nodes still pending.
func (r *verifyRun) progress() (int, []string) {
	done, pending := 0, []string{}
	for _, c := range r.created {
		if c.nv.Outcome != "" {
			done++
		} else {
			pending = append(pending, c.nv.Node)
		}
	}
	slices.Sort(pending)
	return done, pending
}

func progressMessage(nv *NodeVerification) string {
	switch {
	case nv.Outcome == "":
		return fmt.Sprintf("%s: %s (waiting)", nv.Node, nv.Reason)
	case nv.Reason != "":
		return fmt.Sprintf("%s: %s: %s", nv.Node, nv.Outcome, nv.Reason)
	}
	return fmt.Sprintf("%s: %s", nv.Node, nv.Outcome)
}

// verdicts gives each pod still without a verdict its outcome at the timeout, adds what a pod that
// did not pass left (logs, events), and reports the nodes in plan order. A node that did not pass
// fails the step with ErrVerifyFailed, kept as the run's verdict.
func (r *verifyRun) verdicts(ctx context.Context) (runner.Outcome, error) {
	res := r.res
	res.Passed = true
	failed := 0
	for _, pp := range r.p.Create {
		c := r.created[pp.Name]
		r.atTimeout(c.nv)
		if c.nv.Outcome != VerifyPassed {
			r.collect(ctx, c)
			failed++
			res.Passed = false
		}
		res.Nodes = append(res.Nodes, *c.nv)
	}
	if failed > 0 {
		r.verdict = fmt.Errorf("%w: %d of %d GPU node(s) did not pass", ErrVerifyFailed, failed, len(res.Nodes))
		return runner.Outcome{}, r.verdict
	}
	return runner.Outcome{Message: fmt.Sprintf("%d/%d GPU node(s) passed", len(res.Nodes), len(res.Nodes))}, nil
}

// atTimeout gives a node without a verdict when the wait ended its outcome: unschedulable when the
// scheduler said so last, else timeout.
func (r *verifyRun) atTimeout(nv *NodeVerification) {
	switch {
	case nv.Outcome == "" && strings.HasPrefix(nv.Reason, unschedulablePrefix):
		nv.Outcome, nv.Reason = VerifyUnschedulable, strings.TrimPrefix(nv.Reason, unschedulablePrefix)
		nv.Duration = plan.Duration(r.o.Timeout)
	case nv.Outcome == "":
		nv.Outcome = VerifyTimeout
		nv.Reason = strings.TrimSpace(fmt.Sprintf("not finished after %s; %s", r.o.Timeout, nv.Reason))
		nv.Duration = plan.Duration(r.o.Timeout)
	}
}

// podVerdict reads a pod's state: an outcome when it has one, else what it waits on.
func podVerdict(p *corev1.Pod) (VerifyOutcome, string) {
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return VerifyFailed, terminatedReason(cs.Name, t)
		}
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return VerifyPassed, ""
	case corev1.PodFailed:
		reason := strings.TrimSpace(p.Status.Reason + " " + p.Status.Message)
		if reason == "" {
			reason = "the pod failed"
		}
		return VerifyFailed, reason
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return "", unschedulablePrefix + c.Message
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return "", strings.TrimSpace(w.Reason + " " + w.Message)
		}
	}
	if p.Spec.NodeName == "" {
		return "", "not scheduled yet"
	}
	return "", "scheduled, " + strings.ToLower(string(p.Status.Phase))
}

func terminatedReason(container string, t *corev1.ContainerStateTerminated) string {
	s := fmt.Sprintf("container %s exited with code %d", container, t.ExitCode)
	if t.Reason != "" {
		s += " (" + t.Reason + ")"
	}
	if m := strings.TrimSpace(t.Message); m != "" {
		s += ": " + m
	}
	return s
}

// collect adds a node's last log lines and its pod's events; what cannot be read is left out, since
// a pod that never started has no logs.
func (r *verifyRun) collect(ctx context.Context, c *createdPod) {
	if c.nv.Outcome == VerifyFailed {
		c.nv.Logs = r.logs(ctx, c.nv.Pod)
	}
	// By UID: a pod of an earlier run may have had the same name, and its events last an hour.
	evs, err := r.v.Clients.Kube.CoreV1().Events(r.p.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Pod,involvedObject.uid=" + string(c.uid)})
	if err != nil {
		return
	}
	items := evs.Items
	slices.SortStableFunc(items, func(a, b corev1.Event) int { return kube.EventTime(&a).Compare(kube.EventTime(&b)) })
	for _, e := range items {
		if e.InvolvedObject.Name != c.nv.Pod || e.InvolvedObject.UID != c.uid {
			continue
		}
		c.nv.Events = append(c.nv.Events, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, strings.TrimSpace(e.Message)))
	}
}

// logs are a pod's last log lines (nil when they cannot be read).
func (r *verifyRun) logs(ctx context.Context, pod string) []string {
	rc, err := r.pods.GetLogs(pod, &corev1.PodLogOptions{Container: verifyContainer, TailLines: &r.o.LogLines}).Stream(ctx)
	if err != nil {
		return nil
	}
	defer rc.Close()
	var out []string
	sc := bufio.NewScanner(io.LimitReader(rc, 64<<10))
	for sc.Scan() {
		if l := strings.TrimRight(sc.Text(), "\r"); l != "" {
			out = append(out, l)
		}
	}
	return out
}
