package engine

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
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
)

// DefaultVerifyImage is the CUDA vectorAdd sample NVIDIA's GPU Operator guide runs to check that a GPU
// workload runs ("Running Sample GPU Applications",
// https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html).
const DefaultVerifyImage = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"

// Labels on verify's pods: a later run, or the cleanup of an interrupted one, finds them by these.
const (
	VerifyNameLabel = "app.kubernetes.io/name"
	VerifyName      = "gpuctl-verify"
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
}

// Verify runs one short CUDA workload on every GPU node and reports, per node, whether it ran. It
// removes the pods it created on every way out, an interrupt included, and first removes the pods an
// earlier verify run left behind. It creates pods, so it runs under gpuctl's install lock: the pods it
// removes first are never those of a verify still running, and no install changes the stack under it.
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
	// Passed is true when every node passed.
	Passed bool               `json:"passed"`
	Nodes  []NodeVerification `json:"nodes"`
	// RemovedEarlier names the pods of earlier verify runs that this run deleted before it started.
	RemovedEarlier []string `json:"removedEarlier,omitempty"`
	// Removed names the pods this run created and deleted.
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
func (v *Verify) Run(ctx context.Context) (_ *VerifyResult, err error) {
	o := v.Options.withDefaults()
	sel, err := labels.Parse(o.Nodes)
	if err != nil {
		return nil, fmt.Errorf("%w: --nodes %q: %v", ErrInput, o.Nodes, err)
	}
	// Taken before the install record and the nodes are read, and released after the pods are gone.
	ctx, lk, err := takeLock(ctx, v.Clients, o.WaitForLock, v.Sink)
	if err != nil {
		return nil, lockError(err)
	}
	defer lk.release(ctx)
	defer func() { err = lk.lost(err) }()
	ns, err := v.namespace(ctx)
	if err != nil {
		return nil, err
	}
	nodes, err := v.gpuNodes(ctx, sel, o.Nodes)
	if err != nil {
		return nil, err
	}
	id, err := runID()
	if err != nil {
		return nil, err
	}
	res := &VerifyResult{RunID: id, Namespace: ns, Image: o.Image}
	pods := v.Clients.Kube.CoreV1().Pods(ns)

	// Deletion must happen even when ctx was cancelled: it gets its own bounded context.
	cleanupCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	}
	earlier := labels.Set{VerifyNameLabel: VerifyName, managedByLabel: "gpuctl"}.String()
	cctx, cancel := cleanupCtx()
	res.RemovedEarlier, err = deletePods(cctx, v.Clients.Kube, pods, earlier)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("remove the pods of an earlier verify run: %w", err)
	}
	if len(res.RemovedEarlier) > 0 {
		v.emit(event.Event{Type: event.Info, Message: fmt.Sprintf("removed %d pod(s) an earlier verify run left behind: %s", len(res.RemovedEarlier), strings.Join(res.RemovedEarlier, ", "))})
	}

	runSel := labels.Set{VerifyRunLabel: id}.String()
	defer func() {
		cctx, cancel := cleanupCtx()
		defer cancel()
		removed, derr := deletePods(cctx, v.Clients.Kube, pods, runSel)
		res.Removed = removed
		switch {
		case derr != nil:
			v.emit(event.Event{Type: event.Warning, Message: fmt.Sprintf("could not remove every verify pod: %v", derr),
				Hint: fmt.Sprintf("kubectl delete pods -n %s -l %s", ns, runSel)})
		case len(removed) > 0:
			v.emit(event.Event{Type: event.Info, Message: fmt.Sprintf("removed %d verify pod(s) from %s", len(removed), ns)})
		}
	}()

	createTitle := fmt.Sprintf("Start a GPU workload on %d GPU node(s)", len(nodes))
	v.emit(event.Event{Type: event.StepStarted, Step: "create", Title: createTitle})
	created := map[string]*NodeVerification{}
	started := map[string]time.Time{}
	for _, n := range nodes {
		p := verifyPod(ns, id, n, o)
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			return res, fmt.Errorf("create pod %s/%s: %w", ns, p.Name, err)
		}
		created[p.Name] = &NodeVerification{Node: n, Pod: p.Name}
		started[p.Name] = time.Now()
	}
	v.emit(event.Event{Type: event.StepSucceeded, Step: "create", Title: createTitle, Message: fmt.Sprintf("created %d pod(s) in %s", len(created), ns)})

	v.emit(event.Event{Type: event.StepStarted, Step: "wait", Title: "Wait for the GPU workloads"})
	werr := v.wait(ctx, v.Clients.Kube, pods, runSel, o.Timeout, created, started)
	if ctx.Err() != nil {
		msg := "interrupted; removing the verify pods"
		if !interrupted(ctx) {
			msg = fmt.Sprintf("stopped (%v); removing the verify pods", context.Cause(ctx))
		}
		v.emit(event.Event{Type: event.StepInterrupted, Step: "wait", Title: "Wait for the GPU workloads", Message: msg})
		return res, ctx.Err()
	}
	if werr != nil && !errors.Is(werr, context.DeadlineExceeded) {
		return res, werr
	}
	for _, nv := range created {
		switch {
		case nv.Outcome == "" && strings.HasPrefix(nv.Reason, unschedulablePrefix):
			nv.Outcome = VerifyUnschedulable
			nv.Reason = strings.TrimPrefix(nv.Reason, unschedulablePrefix)
			nv.Duration = plan.Duration(o.Timeout)
		case nv.Outcome == "":
			nv.Outcome = VerifyTimeout
			nv.Reason = strings.TrimSpace(fmt.Sprintf("not finished after %s; %s", o.Timeout, nv.Reason))
			nv.Duration = plan.Duration(o.Timeout)
		}
		if nv.Outcome != VerifyPassed {
			v.collect(ctx, pods, ns, nv, o.LogLines)
		}
	}
	res.Passed = true
	for _, n := range nodes {
		for _, nv := range created {
			if nv.Node == n {
				res.Nodes = append(res.Nodes, *nv)
				res.Passed = res.Passed && nv.Outcome == VerifyPassed
			}
		}
	}
	failed := 0
	for _, nv := range res.Nodes {
		if nv.Outcome != VerifyPassed {
			failed++
		}
	}
	if failed > 0 {
		v.emit(event.Event{Type: event.StepFailed, Step: "wait", Title: "Wait for the GPU workloads", Err: fmt.Sprintf("%d/%d GPU node(s) did not pass", failed, len(res.Nodes))})
		return res, fmt.Errorf("%w: %d of %d GPU node(s) did not pass", ErrVerifyFailed, failed, len(res.Nodes))
	}
	v.emit(event.Event{Type: event.StepSucceeded, Step: "wait", Title: "Wait for the GPU workloads", Message: fmt.Sprintf("%d/%d GPU node(s) passed", len(res.Nodes), len(res.Nodes))})
	return res, nil
}

// unschedulablePrefix marks a pending pod's reason as the scheduler's: the outcome is unschedulable,
// not timeout, when the wait ends on it.
const unschedulablePrefix = "unschedulable: "

// wait watches the run's pods until each has a verdict or the timeout passes. An unschedulable pod is
// no verdict yet: the scheduler retries, and a GPU busy with another pod frees up.
func (v *Verify) wait(ctx context.Context, client kubernetes.Interface, pods typedcorev1.PodInterface, sel string, timeout time.Duration, created map[string]*NodeVerification, started map[string]time.Time) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	total := len(created)
	done := func() (int, []string) {
		d, pending := 0, []string{}
		for _, nv := range created {
			if nv.Outcome != "" {
				d++
			} else {
				pending = append(pending, nv.Node)
			}
		}
		slices.Sort(pending)
		return d, pending
	}
	lw := podListWatch(client, pods, sel)
	_, err := watchtools.UntilWithSync(wctx, lw, &corev1.Pod{}, nil, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			return false, nil
		}
		nv := created[p.Name]
		if nv == nil || nv.Outcome != "" {
			return false, nil
		}
		before := nv.Reason
		if ev.Type == watch.Deleted {
			nv.Outcome, nv.Reason = VerifyFailed, "the pod was deleted before it finished"
		} else {
			nv.Outcome, nv.Reason = podVerdict(p)
		}
		if nv.Outcome != "" {
			nv.Duration = plan.Duration(time.Since(started[p.Name]).Round(time.Millisecond))
		}
		d, pending := done()
		if nv.Outcome != "" || nv.Reason != before {
			msg := fmt.Sprintf("%s: %s", nv.Node, nv.Outcome)
			if nv.Outcome == "" {
				msg = fmt.Sprintf("%s: %s (waiting)", nv.Node, nv.Reason)
			} else if nv.Reason != "" {
				msg += ": " + nv.Reason
			}
			v.emit(event.Event{Type: event.StepProgress, Step: "wait", Title: "Wait for the GPU workloads", Message: msg, Done: d, Total: total, Pending: pending})
		}
		return d == total, nil
	})
	if err != nil && wctx.Err() != nil {
		// watchtools reports any end of its context as "timed out waiting for the condition".
		return wctx.Err()
	}
	return err
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
func (v *Verify) collect(ctx context.Context, pods typedcorev1.PodInterface, ns string, nv *NodeVerification, lines int64) {
	if nv.Outcome == VerifyFailed {
		if rc, err := pods.GetLogs(nv.Pod, &corev1.PodLogOptions{Container: verifyContainer, TailLines: &lines}).Stream(ctx); err == nil {
			sc := bufio.NewScanner(io.LimitReader(rc, 64<<10))
			for sc.Scan() {
				if l := strings.TrimRight(sc.Text(), "\r"); l != "" {
					nv.Logs = append(nv.Logs, l)
				}
			}
			_ = rc.Close()
		}
	}
	evs, err := v.Clients.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + nv.Pod})
	if err != nil {
		return
	}
	items := evs.Items
	slices.SortStableFunc(items, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	for _, e := range items {
		if e.InvolvedObject.Name != nv.Pod {
			continue
		}
		nv.Events = append(nv.Events, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, strings.TrimSpace(e.Message)))
	}
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

// deletePods deletes the pods sel selects and waits, with a watch, until they are gone; it returns
// their names.
func deletePods(ctx context.Context, client kubernetes.Interface, pods typedcorev1.PodInterface, sel string) ([]string, error) {
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range list.Items {
		if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return names, fmt.Errorf("delete pod %s: %w", p.Name, err)
		}
		names = append(names, p.Name)
	}
	if len(names) == 0 {
		return nil, nil
	}
	slices.Sort(names)
	lw := podListWatch(client, pods, sel)
	gone := func(store cache.Store) bool { return len(store.ListKeys()) == 0 }
	var store cache.Store
	_, err = watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, func(s cache.Store) (bool, error) {
		store = s
		return gone(s), nil
	}, func(watch.Event) (bool, error) {
		// The store already reflects the event when the condition runs.
		return gone(store), nil
	})
	if err != nil {
		return names, fmt.Errorf("wait for pods %s to go: %w", strings.Join(names, ", "), err)
	}
	return names, nil
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
func verifyPod(ns, id, node string, o VerifyOptions) *corev1.Pod {
	no := false
	grace := int64(5)
	var secrets []corev1.LocalObjectReference
	for _, s := range o.ImagePullSecrets {
		secrets = append(secrets, corev1.LocalObjectReference{Name: s})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      verifyPodName(node, id),
			Namespace: ns,
			Labels: map[string]string{
				VerifyNameLabel: VerifyName,
				managedByLabel:  "gpuctl",
				VerifyRunLabel:  id,
			},
			Annotations: map[string]string{verifyNodeAnno: node},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: &grace,
			ImagePullSecrets:              secrets,
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
				}}},
			}},
			Tolerations: []corev1.Toleration{{Key: plan.TaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffect(plan.TaintEffect)}},
			Containers: []corev1.Container{{
				Name:  verifyContainer,
				Image: o.Image,
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

// verifyPodName is gpuctl-verify-<node>-<run>, the node's name cut so the whole stays a valid
// 63-character hostname.
func verifyPodName(node, id string) string {
	prefix := VerifyName + "-"
	room := 63 - len(prefix) - 1 - len(id)
	n := strings.ToLower(node)
	if len(n) > room {
		n = n[:room]
	}
	n = strings.TrimRight(strings.ReplaceAll(n, ".", "-"), "-")
	return prefix + n + "-" + id
}

// runID is a short random ID for one run.
func runID() (string, error) {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
