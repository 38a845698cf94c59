package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// DefaultVerifyImage is the CUDA vectorAdd sample NVIDIA's GPU Operator guide runs to check that a GPU
// workload runs ("Running Sample GPU Applications",
// https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html).
const DefaultVerifyImage = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"

// Labels on verify's pods: a later run, or the cleanup of an interrupted one, finds them by these.
const (
	VerifyNameLabel = "app.kubernetes.io/name"
	VerifyName      = plan.VerifyName
	VerifyRunLabel  = "gpuctl.io/verify-run"
	verifyNodeAnno  = "gpuctl.io/verify-node"
	managedByLabel  = "app.kubernetes.io/managed-by"
	verifyContainer = "vectoradd"
)

// GPUPresentLabel is the label the GPU operator puts on the GPU nodes it manages (as gpuctl status finds them).
const GPUPresentLabel = "nvidia.com/gpu.present"

// ErrNoGPUNodes: no node carries nvidia.com/gpu.present=true, so there is nothing to verify.
var ErrNoGPUNodes = errors.New("no GPU nodes")

// ErrVerifyFailed: at least one GPU node did not pass verification.
var ErrVerifyFailed = errors.New("GPU verification failed")

// VerifyOptions are gpuctl verify's options; the zero value verifies every GPU node with the default image.
type VerifyOptions struct {
	// Image is the workload's image (default DefaultVerifyImage): a mirror's copy for air-gapped clusters.
	Image string `json:"image"`
	// Nodes is a label selector that narrows the GPU nodes ("" = all).
	Nodes string `json:"nodes,omitempty"`
	// Timeout bounds the wait for the workloads (default 5m).
	Timeout time.Duration `json:"-"`
	// ImagePullSecrets name Secrets in the namespace to pull Image with.
	ImagePullSecrets []string `json:"imagePullSecrets,omitempty"`
	// LogLines is how many of a failed pod's last log lines to keep (default 20).
	LogLines int64 `json:"-"`
	// WaitForLock is how long to wait for another run's install lock (0: fail at once with ErrLocked).
	WaitForLock time.Duration `json:"-"`
	// DryRun makes the plan and returns it: nothing is written, not even the lock.
	DryRun bool `json:"-"`
}

// Verify runs one short CUDA workload on every GPU node and reports, per node, whether it ran. It
// plans every write first (plan.VerifyPlan): the pods an earlier verify run left behind, deleted
// first, and one pod per GPU node, removed on every way out, an interrupt included; the run carries
// out exactly that. It creates pods, so it runs under gpuctl's install lock: the pods it removes
// first are never those of a verify still running, and no install changes the stack under it.
type Verify struct {
	Clients *kube.Clients
	Options VerifyOptions
	// Sink receives progress (nil: discarded).
	Sink event.Sink
}

// VerifyOutcome is one GPU node's verdict.
type VerifyOutcome string

// Verify outcomes.
const (
	VerifyPassed        VerifyOutcome = "passed"
	VerifyFailed        VerifyOutcome = "failed"
	VerifyUnschedulable VerifyOutcome = "unschedulable"
	VerifyTimeout       VerifyOutcome = "timeout"
)

// NodeVerification is one GPU node's result.
type NodeVerification struct {
	Node    string        `json:"node"`
	Pod     string        `json:"pod"`
	Outcome VerifyOutcome `json:"outcome"`
	// Reason says why a node did not pass: the container's exit, the scheduler's message, the state
	// the pod was last seen in.
	Reason string `json:"reason,omitempty"`
	// Logs are the failed container's last log lines (none when the logs cannot be read).
	Logs []string `json:"logs,omitempty"`
	// Events are the pod's events, oldest first ("Warning FailedScheduling: 0/6 nodes are available: …").
	Events []string `json:"events,omitempty"`
	// Duration is from the pod's creation to its verdict.
	Duration plan.Duration `json:"duration"`
}

// VerifyResult is what gpuctl verify found.
type VerifyResult struct {
	// RunID is the value of the gpuctl.io/verify-run label on this run's pods.
	RunID     string `json:"runID"`
	Namespace string `json:"namespace"`
	Image     string `json:"image"`
	// DryRun: nothing was written; Plan is what a run would do.
	DryRun bool `json:"dryRun,omitempty"`
	// Passed is true when every node passed.
	Passed bool               `json:"passed"`
	Nodes  []NodeVerification `json:"nodes"`
	// Plan is every write the run decided on before its first.
	Plan *plan.VerifyPlan `json:"plan,omitempty"`
	// Done is what the run did, in the plan's shape: the earlier pods it deleted, the pods it created
	// and those of them it deleted at the end. A run that went as planned has Done equal to Plan.
	Done *plan.VerifyPlan `json:"done,omitempty"`
	// RemovedEarlier names the pods of earlier verify runs that this run deleted before it started
	// (Done.Delete's names).
	RemovedEarlier []string `json:"removedEarlier,omitempty"`
	// Removed names the pods this run created and deleted (Done.DeleteAtEnd).
	Removed []string `json:"removed,omitempty"`
}

func (v *Verify) emit(e event.Event) {
	if v.Sink != nil {
		e.Time = time.Now()
		v.Sink.Event(e)
	}
}

func (o VerifyOptions) withDefaults() VerifyOptions {
	if o.Image == "" {
		o.Image = DefaultVerifyImage
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.LogLines <= 0 {
		o.LogLines = 20
	}
	return o
}

// Run verifies. It returns ErrVerifyFailed (with the result) when a node did not pass, ErrNotInstalled
// when there is no GPU stack, ErrNoGPUNodes when no node is labelled a GPU node, and an ErrInput error
// for a selector that does not parse or matches no GPU node; those three before anything is written.
// With DryRun it returns the plan and writes nothing.
func (v *Verify) Run(ctx context.Context) (_ *VerifyResult, err error) {
	o := v.Options.withDefaults()
	sel, err := labels.Parse(o.Nodes)
	if err != nil {
		return nil, fmt.Errorf("%w: --nodes %q: %v", ErrInput, o.Nodes, err)
	}
	if o.DryRun {
		p, err := v.plan(ctx, o, sel)
		if err != nil {
			return nil, err
		}
		return &VerifyResult{RunID: p.RunID, Namespace: p.Namespace, Image: p.Image, DryRun: true, Plan: p}, nil
	}
	// Taken before the install record, the nodes and the earlier pods are read, and released after
	// the run's pods are gone.
	ctx, lk, err := runner.TakeLock(ctx, v.Clients, o.WaitForLock, v.Sink)
	if err != nil {
		return nil, runner.LockError(err)
	}
	defer lk.Release(ctx)
	defer func() { err = lk.Lost(err) }()
	p, err := v.plan(ctx, o, sel)
	if err != nil {
		return nil, err
	}
	r := newVerifyRun(v, o, p)
	if err := r.deleteEarlier(ctx); err != nil {
		return nil, err
	}
	defer r.deleteCreated(ctx)
	if err := r.create(ctx); err != nil {
		return r.res, err
	}
	if err := r.waitAll(ctx); err != nil {
		return r.res, err
	}
	return r.res, r.verdicts(ctx)
}

// plan reads what verify's plan is made of (the operator's namespace, the GPU nodes, the pods earlier
// runs left) and makes it.
func (v *Verify) plan(ctx context.Context, o VerifyOptions, sel labels.Selector) (*plan.VerifyPlan, error) {
	ns, err := v.namespace(ctx)
	if err != nil {
		return nil, err
	}
	nodes, err := v.gpuNodes(ctx, sel, o.Nodes)
	if err != nil {
		return nil, err
	}
	earlier, err := v.earlierPods(ctx, ns)
	if err != nil {
		return nil, err
	}
	in := plan.VerifyInput{Namespace: ns, Image: o.Image, ImagePullSecrets: o.ImagePullSecrets, Nodes: nodes, Earlier: earlier}
	in.RunID = plan.VerifyRunID(in)
	return plan.BuildVerify(in), nil
}

// earlierSelector selects the pods of every verify run.
const earlierSelector = managedByLabel + "=gpuctl," + VerifyNameLabel + "=" + VerifyName

// earlierPods are the verify pods in ns: under the lock, none is a running verify's, so an earlier
// run left them (one killed with SIGKILL cannot clean up).
func (v *Verify) earlierPods(ctx context.Context, ns string) ([]plan.VerifyPodRef, error) {
	list, err := v.Clients.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: earlierSelector})
	if err != nil {
		return nil, fmt.Errorf("list the pods of earlier verify runs in %s: %w", ns, err)
	}
	var out []plan.VerifyPodRef
	for _, p := range list.Items {
		out = append(out, plan.VerifyPodRef{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Run: p.Labels[VerifyRunLabel]})
	}
	return out, nil
}

// verifyRun carries out one verify plan and records what it did.
type verifyRun struct {
	v    *Verify
	o    VerifyOptions
	p    *plan.VerifyPlan
	pods typedcorev1.PodInterface
	res  *VerifyResult
	// created are the run's pods by name: their node's verdict, UID and creation time.
	created map[string]*createdPod
}

type createdPod struct {
	nv      *NodeVerification
	uid     types.UID
	started time.Time
}

func newVerifyRun(v *Verify, o VerifyOptions, p *plan.VerifyPlan) *verifyRun {
	done := &plan.VerifyPlan{RunID: p.RunID, Namespace: p.Namespace, Image: p.Image, ImagePullSecrets: p.ImagePullSecrets}
	return &verifyRun{v: v, o: o, p: p, pods: v.Clients.Kube.CoreV1().Pods(p.Namespace), created: map[string]*createdPod{},
		res: &VerifyResult{RunID: p.RunID, Namespace: p.Namespace, Image: p.Image, Plan: p, Done: done}}
}

// cleanupContext bounds a deletion that must happen even when ctx was cancelled (Ctrl-C).
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
}

// deleteEarlier deletes the plan's earlier pods, each only while it has the UID planned, and waits
// until they are gone (they may hold a GPU).
func (r *verifyRun) deleteEarlier(ctx context.Context) error {
	if len(r.p.Delete) == 0 {
		return nil
	}
	var targets []podTarget
	for _, d := range r.p.Delete {
		targets = append(targets, podTarget{name: d.Name, uid: d.UID})
	}
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	deleted, err := deletePods(cctx, r.v.Clients.Kube, r.pods, earlierSelector, targets, r.skipped)
	for _, d := range r.p.Delete {
		if slices.Contains(deleted, d.Name) {
			r.res.Done.Delete = append(r.res.Done.Delete, d)
			r.res.RemovedEarlier = append(r.res.RemovedEarlier, d.Name)
		}
	}
	if err != nil {
		return fmt.Errorf("remove the pods of an earlier verify run: %w", err)
	}
	if n := len(r.res.RemovedEarlier); n > 0 {
		r.v.emit(event.Event{Type: event.Info, Message: fmt.Sprintf("removed %d pod(s) an earlier verify run left behind: %s", n, strings.Join(r.res.RemovedEarlier, ", "))})
	}
	return nil
}

// skipped says that a planned deletion did not happen, and why.
func (r *verifyRun) skipped(name, why string) {
	r.v.emit(event.Event{Type: event.Warning, Message: fmt.Sprintf("left pod %s/%s alone: %s", r.p.Namespace, name, why)})
}

// deleteCreated deletes the run's pods, on every way out: those of the plan's DeleteAtEnd that carry
// this run's label, by the UIDs they have.
func (r *verifyRun) deleteCreated(ctx context.Context) {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	runSel := labels.Set{VerifyRunLabel: r.p.RunID}.String()
	list, err := r.pods.List(cctx, metav1.ListOptions{LabelSelector: runSel})
	var targets []podTarget
	if err == nil {
		for _, p := range list.Items {
			if slices.Contains(r.p.DeleteAtEnd, p.Name) {
				targets = append(targets, podTarget{name: p.Name, uid: p.UID})
			}
		}
		var deleted []string
		deleted, err = deletePods(cctx, r.v.Clients.Kube, r.pods, runSel, targets, r.skipped)
		for _, name := range r.p.DeleteAtEnd {
			if slices.Contains(deleted, name) {
				r.res.Done.DeleteAtEnd = append(r.res.Done.DeleteAtEnd, name)
			}
		}
		r.res.Removed = r.res.Done.DeleteAtEnd
	}
	switch {
	case err != nil:
		r.v.emit(event.Event{Type: event.Warning, Message: fmt.Sprintf("could not remove every verify pod: %v", err),
			Hint: fmt.Sprintf("kubectl delete pods -n %s -l %s", r.p.Namespace, runSel)})
	case len(r.res.Removed) > 0:
		r.v.emit(event.Event{Type: event.Info, Message: fmt.Sprintf("removed %d verify pod(s) from %s", len(r.res.Removed), r.p.Namespace)})
	}
}

// create creates the plan's pods.
func (r *verifyRun) create(ctx context.Context) error {
	title := fmt.Sprintf("Start a GPU workload on %d GPU node(s)", len(r.p.Create))
	r.v.emit(event.Event{Type: event.StepStarted, Step: "create", Title: title})
	for _, pp := range r.p.Create {
		made, err := r.pods.Create(ctx, verifyPod(r.p, pp), metav1.CreateOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("create pod %s/%s: %w", pp.Namespace, pp.Name, err)
		}
		r.created[pp.Name] = &createdPod{nv: &NodeVerification{Node: pp.Node, Pod: pp.Name}, uid: made.UID, started: time.Now()}
		r.res.Done.Create = append(r.res.Done.Create, pp)
	}
	r.v.emit(event.Event{Type: event.StepSucceeded, Step: "create", Title: title, Message: fmt.Sprintf("created %d pod(s) in %s", len(r.created), r.p.Namespace)})
	return nil
}

const waitTitle = "Wait for the GPU workloads"

// waitAll waits for every pod's verdict, up to the timeout; an interrupt ends it with ctx's error.
func (r *verifyRun) waitAll(ctx context.Context) error {
	r.v.emit(event.Event{Type: event.StepStarted, Step: "wait", Title: waitTitle})
	err := r.wait(ctx)
	if ctx.Err() != nil {
		msg := "interrupted; removing the verify pods"
		if !runner.Interrupted(ctx) {
			msg = fmt.Sprintf("stopped (%v); removing the verify pods", context.Cause(ctx))
		}
		r.v.emit(event.Event{Type: event.StepInterrupted, Step: "wait", Title: waitTitle, Message: msg})
		return ctx.Err()
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// unschedulablePrefix marks a pending pod's reason as the scheduler's: the outcome is unschedulable,
// not timeout, when the wait ends on it.
const unschedulablePrefix = "unschedulable: "

// wait watches the run's pods until each has a verdict or the timeout passes. An unschedulable pod is
// no verdict yet: the scheduler retries, and a GPU busy with another pod frees up.
func (r *verifyRun) wait(ctx context.Context) error {
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
			r.v.emit(event.Event{Type: event.StepProgress, Step: "wait", Title: waitTitle, Message: progressMessage(nv), Done: done, Total: len(r.created), Pending: pending})
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
// did not pass left (logs, events), and reports the nodes in plan order.
func (r *verifyRun) verdicts(ctx context.Context) error {
	res := r.res
	res.Passed = true
	failed := 0
	for _, pp := range r.p.Create {
		c := r.created[pp.Name]
		nv := c.nv
		switch {
		case nv.Outcome == "" && strings.HasPrefix(nv.Reason, unschedulablePrefix):
			nv.Outcome, nv.Reason = VerifyUnschedulable, strings.TrimPrefix(nv.Reason, unschedulablePrefix)
			nv.Duration = plan.Duration(r.o.Timeout)
		case nv.Outcome == "":
			nv.Outcome = VerifyTimeout
			nv.Reason = strings.TrimSpace(fmt.Sprintf("not finished after %s; %s", r.o.Timeout, nv.Reason))
			nv.Duration = plan.Duration(r.o.Timeout)
		}
		if nv.Outcome != VerifyPassed {
			r.collect(ctx, c)
			failed++
			res.Passed = false
		}
		res.Nodes = append(res.Nodes, *nv)
	}
	if failed > 0 {
		r.v.emit(event.Event{Type: event.StepFailed, Step: "wait", Title: waitTitle, Err: fmt.Sprintf("%d/%d GPU node(s) did not pass", failed, len(res.Nodes))})
		return fmt.Errorf("%w: %d of %d GPU node(s) did not pass", ErrVerifyFailed, failed, len(res.Nodes))
	}
	r.v.emit(event.Event{Type: event.StepSucceeded, Step: "wait", Title: waitTitle, Message: fmt.Sprintf("%d/%d GPU node(s) passed", len(res.Nodes), len(res.Nodes))})
	return nil
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
	slices.SortStableFunc(items, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
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

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// podTarget is a pod to delete: by name, only while it has this UID.
type podTarget struct {
	name string
	uid  types.UID
}

// deletePods deletes the targets, each with a UID precondition, and waits, with a watch on the pods
// sel selects, until they are gone; it returns the names it deleted. A target already gone, or
// replaced meanwhile by another pod of the same name, is not deleted: skipped says which and why.
func deletePods(ctx context.Context, client kubernetes.Interface, pods typedcorev1.PodInterface, sel string, targets []podTarget, skipped func(name, why string)) ([]string, error) {
	var names []string
	uids := map[types.UID]bool{}
	for _, t := range targets {
		uid := t.uid
		err := pods.Delete(ctx, t.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case apierrors.IsNotFound(err):
			skipped(t.name, "already gone")
			continue
		case apierrors.IsConflict(err):
			skipped(t.name, fmt.Sprintf("it is no longer the pod planned (uid %s): another was made under its name", t.uid))
			continue
		case err != nil:
			return names, fmt.Errorf("delete pod %s: %w", t.name, err)
		}
		names = append(names, t.name)
		uids[t.uid] = true
	}
	if len(names) == 0 {
		return nil, nil
	}
	if err := waitGone(ctx, client, pods, sel, uids); err != nil {
		return names, fmt.Errorf("wait for pods %s to go: %w", strings.Join(names, ", "), err)
	}
	return names, nil
}

// waitGone waits, with a watch on the pods sel selects, until none of them has one of uids.
func waitGone(ctx context.Context, client kubernetes.Interface, pods typedcorev1.PodInterface, sel string, uids map[types.UID]bool) error {
	gone := func(store cache.Store) bool {
		for _, o := range store.List() {
			if p, ok := o.(*corev1.Pod); ok && uids[p.UID] {
				return false
			}
		}
		return true
	}
	var store cache.Store
	_, err := watchtools.UntilWithSync(ctx, podListWatch(client, pods, sel), &corev1.Pod{}, func(s cache.Store) (bool, error) {
		store = s
		return gone(s), nil
	}, func(watch.Event) (bool, error) {
		// The store already reflects the event when the condition runs.
		return gone(store), nil
	})
	return err
}

// podListWatch lists and watches the pods sel selects. The reflector is told whether the client can
// do streaming lists (WatchListClient is on by default since client-go v0.35; the fakes cannot).
func podListWatch(client kubernetes.Interface, pods typedcorev1.PodInterface, sel string) cache.ListerWatcher {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return pods.Watch(ctx, o)
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, client)
}

// namespace finds the operator's namespace from the install record (or -n for an install that
// predates the record); ErrNotInstalled when there is no GPU stack.
func (v *Verify) namespace(ctx context.Context) (string, error) {
	rec, err := record.Read(ctx, v.Clients.Kube)
	if err != nil {
		return "", err
	}
	if rec != nil && !rec.Uninstalled {
		return rec.Namespace, nil
	}
	ns := v.Clients.Namespace
	if v.Clients.Getter != nil {
		if rc, err := release.New(v.Clients.Getter, ns, nil); err == nil {
			if last, _ := rc.Last(plan.OperatorRelease); last != nil {
				return ns, nil
			}
		}
	}
	return "", fmt.Errorf("%w: no install record %s/%s and no %s release in %s", ErrNotInstalled, record.Namespace, record.Name, plan.OperatorRelease, ns)
}

// gpuNodes lists the nodes labelled nvidia.com/gpu.present=true that sel selects, sorted.
func (v *Verify) gpuNodes(ctx context.Context, sel labels.Selector, selText string) ([]string, error) {
	list, err := v.Clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: GPUPresentLabel + "=true"})
	if err != nil {
		return nil, fmt.Errorf("list GPU nodes: %w", err)
	}
	var all, picked []string
	for _, n := range list.Items {
		all = append(all, n.Name)
		if sel.Matches(labels.Set(n.Labels)) {
			picked = append(picked, n.Name)
		}
	}
	slices.Sort(all)
	slices.Sort(picked)
	switch {
	case len(all) == 0:
		return nil, fmt.Errorf("%w: no node is labelled %s=true", ErrNoGPUNodes, GPUPresentLabel)
	case len(picked) == 0:
		return nil, fmt.Errorf("%w: --nodes %q matches none of the GPU nodes (%s)", ErrInput, selText, strings.Join(all, ", "))
	}
	return picked, nil
}

// verifyPod is the workload for one node: pinned to it by node affinity (so the scheduler, not the
// pod, decides whether it fits, and says why when it does not), tolerating the GPU taint, one GPU.
func verifyPod(p *plan.VerifyPlan, pp plan.VerifyPod) *corev1.Pod {
	no := false
	grace := int64(5)
	var secrets []corev1.LocalObjectReference
	for _, s := range p.ImagePullSecrets {
		secrets = append(secrets, corev1.LocalObjectReference{Name: s})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      pp.Name,
			Namespace: pp.Namespace,
			Labels: map[string]string{
				VerifyNameLabel: VerifyName,
				managedByLabel:  "gpuctl",
				VerifyRunLabel:  p.RunID,
			},
			Annotations: map[string]string{verifyNodeAnno: pp.Node},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: &grace,
			ImagePullSecrets:              secrets,
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{pp.Node}}},
				}}},
			}},
			Tolerations: []corev1.Toleration{{Key: plan.TaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffect(plan.TaintEffect)}},
			Containers: []corev1.Container{{
				Name:  verifyContainer,
				Image: pp.Image,
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
				},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
			}},
		},
	}
}
