package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// The steps of a verify run, by ID. Scripts that follow --progress json watch the wait's.
const (
	verifyStepDeleteEarlier = "delete-earlier"
	verifyStepCreate        = "create"
	verifyStepWait          = "wait"
	// verifyStepDelete deletes the run's pods after the others, on every way out.
	verifyStepDelete = "delete"
)

// verifyRun carries out one verify plan and records what it did.
type verifyRun struct {
	v    *Verify
	o    VerifyOptions
	p    *plan.VerifyPlan
	pods typedcorev1.PodInterface
	// templates are the run's ResourceClaimTemplates by name, with their UIDs.
	templates map[string]types.UID
	res       *VerifyResult
	// created are the run's pods by name: their node's verdict, UID and creation time.
	created map[string]*createdPod
	// creating: the create step began, so pods of this run may exist.
	creating bool
	// verdict is ErrVerifyFailed's error when a node did not pass.
	verdict error
}

type createdPod struct {
	nv      *NodeVerification
	uid     types.UID
	started time.Time
}

func newVerifyRun(v *Verify, o VerifyOptions, p *plan.VerifyPlan) *verifyRun {
	done := &plan.VerifyPlan{RunID: p.RunID, Namespace: p.Namespace, Image: p.Image, ImagePullSecrets: p.ImagePullSecrets}
	return &verifyRun{v: v, o: o, p: p, pods: v.Clients.Kube.CoreV1().Pods(p.Namespace), created: map[string]*createdPod{}, templates: map[string]types.UID{},
		res: &VerifyResult{RunID: p.RunID, Namespace: p.Namespace, Image: p.Image, Plan: p, Done: done}}
}

// run carries out the plan's steps through the runner, then deletes the run's pods, on every way
// out (an interrupt, a failed step, a lost lock), with a context of its own: the run's may be
// cancelled. A node that did not pass is the run's verdict, returned as it is.
func (r *verifyRun) run(ctx context.Context) error {
	rn := &runner.Runner{Sink: r.v.Sink, Resume: VerifyResume}
	err := rn.Run(ctx, r.steps())
	r.res.Steps = rn.Results
	var leftErr error
	if r.creating {
		var del runner.StepResult
		del, leftErr = r.deleteCreated(ctx)
		r.res.Steps = append(r.res.Steps, del)
	}
	if r.verdict != nil && errors.Is(err, ErrVerifyFailed) {
		err = r.verdict
	}
	// Pods left behind may hold a GPU: whatever the verdict, the run failed to clean up, and says so
	// (an interrupt stays an interrupt, with the pods named in its steps).
	if leftErr != nil && !runner.Interrupted(ctx) {
		return errors.Join(err, leftErr)
	}
	return err
}

// steps are the plan's steps: the earlier runs' pods deleted, this run's created, their verdicts.
func (r *verifyRun) steps() []runner.Step {
	earlier := runner.Step{ID: verifyStepDeleteEarlier, Title: "Delete the pods earlier verify runs left",
		Do: r.deleteEarlier, State: r.earlierState}
	if len(r.p.Delete) == 0 && len(r.p.DeleteClaimTemplates) == 0 {
		earlier.Skip = "no pod of an earlier run is left"
	}
	return []runner.Step{
		earlier,
		{ID: verifyStepCreate, Title: "Create one CUDA pod per GPU node", Do: r.create, State: r.createdState},
		{ID: verifyStepWait, Title: "Wait for each pod's verdict", Do: r.waitStep, State: r.waitState,
			Hint: "the result names each GPU node that did not pass, with its pod's last log lines and events"},
	}
}

// deleteEarlier deletes the plan's earlier pods, each only while it has the UID planned, and waits
// until they are gone (they may hold a GPU).
func (r *verifyRun) deleteEarlier(ctx context.Context, _ func(health.Progress)) (runner.Outcome, error) {
	var targets []podTarget
	for _, d := range r.p.Delete {
		targets = append(targets, podTarget{name: d.Name, uid: d.UID})
	}
	deleted, err := deletePods(ctx, r.v.Clients.Kube, r.pods, earlierSelector, targets, r.skipped)
	for _, d := range r.p.Delete {
		if slices.Contains(deleted, d.Name) {
			r.res.Done.Delete = append(r.res.Done.Delete, d)
			r.res.RemovedEarlier = append(r.res.RemovedEarlier, d.Name)
		}
	}
	if err != nil {
		return runner.Outcome{}, err
	}
	// The templates after the pods: a pod being made needs its template.
	var templates []string
	for _, d := range r.p.DeleteClaimTemplates {
		gone, err := r.deleteTemplate(ctx, d.Name, d.UID)
		if err != nil {
			return runner.Outcome{}, err
		}
		if gone {
			r.res.Done.DeleteClaimTemplates = append(r.res.Done.DeleteClaimTemplates, d)
			r.res.RemovedClaimTemplates = append(r.res.RemovedClaimTemplates, d.Name)
			templates = append(templates, d.Name)
		}
	}
	if len(deleted) == 0 && len(templates) == 0 {
		return runner.Outcome{Skipped: true, Message: "each was gone, or another object had its name"}, nil
	}
	msg := fmt.Sprintf("removed %d pod(s) an earlier verify run left behind: %s", len(deleted), strings.Join(r.res.RemovedEarlier, ", "))
	if len(templates) > 0 {
		msg += fmt.Sprintf("; and %d ResourceClaimTemplate(s): %s", len(templates), strings.Join(templates, ", "))
	}
	return runner.Outcome{Changed: true, Message: msg}, nil
}

// deleteTemplate deletes a ResourceClaimTemplate only while it has uid; false (with a warning) when it
// was already gone or another has its name.
func (r *verifyRun) deleteTemplate(ctx context.Context, name string, uid types.UID) (bool, error) {
	err := r.v.Clients.Kube.ResourceV1().ResourceClaimTemplates(r.p.Namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err):
		r.skippedKind("ResourceClaimTemplate", name, "already gone")
		return false, nil
	case apierrors.IsConflict(err):
		r.skippedKind("ResourceClaimTemplate", name, fmt.Sprintf("it is no longer the one planned (uid %s): another was made under its name", uid))
		return false, nil
	case err != nil:
		return false, fmt.Errorf("delete ResourceClaimTemplate %s/%s: %w", r.p.Namespace, name, err)
	}
	return true, nil
}

// earlierState says which of the planned earlier pods are still there.
func (r *verifyRun) earlierState(ctx context.Context) (string, error) {
	list, err := r.pods.List(ctx, metav1.ListOptions{LabelSelector: earlierSelector})
	if err != nil {
		return "", err
	}
	var left []string
	for _, d := range r.p.Delete {
		if slices.ContainsFunc(list.Items, func(p corev1.Pod) bool { return p.UID == d.UID }) {
			left = append(left, d.Name)
		}
	}
	if len(left) == 0 {
		return fmt.Sprintf("all %d deleted", len(r.p.Delete)), nil
	}
	return fmt.Sprintf("%d/%d still there: %s", len(left), len(r.p.Delete), strings.Join(left, ", ")), nil
}

// skipped says that a planned deletion of a pod did not happen, and why.
func (r *verifyRun) skipped(name, why string) { r.skippedKind("pod", name, why) }

func (r *verifyRun) skippedKind(kind, name, why string) {
	r.v.emit(event.Event{Type: event.Warning, Message: fmt.Sprintf("left %s %s/%s alone: %s", kind, r.p.Namespace, name, why)})
}

// create creates the plan's ResourceClaimTemplates, then its pods.
func (r *verifyRun) create(ctx context.Context, _ func(health.Progress)) (runner.Outcome, error) {
	r.creating = true
	classes := map[string]string{}
	for _, ct := range r.p.ClaimTemplates {
		made, err := r.v.Clients.Kube.ResourceV1().ResourceClaimTemplates(ct.Namespace).Create(ctx, verifyClaimTemplate(r.p, ct), metav1.CreateOptions{})
		if err != nil {
			return runner.Outcome{}, fmt.Errorf("create ResourceClaimTemplate %s/%s: %w", ct.Namespace, ct.Name, err)
		}
		r.templates[ct.Name] = made.UID
		classes[ct.Name] = ct.DeviceClass
		r.res.Done.ClaimTemplates = append(r.res.Done.ClaimTemplates, createdClaimTemplate(made))
	}
	for _, pp := range r.p.Create {
		made, err := r.pods.Create(ctx, verifyPod(r.p, pp), metav1.CreateOptions{})
		if err != nil {
			return runner.Outcome{}, fmt.Errorf("create pod %s/%s: %w", pp.Namespace, pp.Name, err)
		}
		// The verdict names the node and request of the pod as created, as Done does.
		done := createdVerifyPod(made)
		nv := &NodeVerification{Node: done.Node, Pod: done.Name, Resource: done.Resource, DeviceClass: classes[done.ClaimTemplate]}
		if nv.Resource == "" && nv.DeviceClass == "" {
			nv.Resource = plan.VerifyGPUResource
		}
		r.created[pp.Name] = &createdPod{nv: nv, uid: made.UID, started: time.Now()}
		r.res.Done.Create = append(r.res.Done.Create, done)
	}
	msg := fmt.Sprintf("created %d pod(s) in %s", len(r.created), r.p.Namespace)
	if len(r.templates) > 0 {
		msg = fmt.Sprintf("created %d ResourceClaimTemplate(s) and %d pod(s) in %s", len(r.templates), len(r.created), r.p.Namespace)
	}
	return runner.Outcome{Changed: true, Message: msg}, nil
}

// createdVerifyPod is a pod as the API server returned it on create, in the plan's shape: what the run
// reports it created is what the cluster holds (admission may have changed the pod), never the plan
// copied. Its node is the one it is bound to, or else the one its node affinity pins it to (verify's
// pods are not bound when created); "" when the affinity names no single node.
func createdVerifyPod(pod *corev1.Pod) plan.VerifyPod {
	vp := plan.VerifyPod{Namespace: pod.Namespace, Name: pod.Name, Node: pod.Spec.NodeName}
	if a := pod.Spec.Affinity; vp.Node == "" && a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		var pinned []string
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range term.MatchFields {
				if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn {
					pinned = append(pinned, f.Values...)
				}
			}
		}
		if len(pinned) == 1 {
			vp.Node = pinned[0]
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name != verifyContainer {
			continue
		}
		vp.Image = c.Image
		var resources []string
		for name := range c.Resources.Limits {
			resources = append(resources, string(name))
		}
		slices.Sort(resources)
		vp.Resource = strings.Join(resources, ",")
	}
	for _, c := range pod.Spec.ResourceClaims {
		if c.Name == verifyClaimName && c.ResourceClaimTemplateName != nil {
			vp.ClaimTemplate = *c.ResourceClaimTemplateName
		}
	}
	return vp
}

// createdClaimTemplate is a ResourceClaimTemplate as the API server returned it on create, in the
// plan's shape.
func createdClaimTemplate(t *resourcev1.ResourceClaimTemplate) plan.VerifyClaimTemplate {
	ct := plan.VerifyClaimTemplate{Namespace: t.Namespace, Name: t.Name}
	for _, req := range t.Spec.Spec.Devices.Requests {
		if req.Name == verifyClaimName && req.Exactly != nil {
			ct.DeviceClass = req.Exactly.DeviceClassName
		}
	}
	return ct
}

// createdState says which of the plan's pods exist (the run deletes them next).
func (r *verifyRun) createdState(ctx context.Context) (string, error) {
	list, err := r.pods.List(ctx, metav1.ListOptions{LabelSelector: r.runSelector()})
	if err != nil {
		return "", err
	}
	var on []string
	for _, pp := range r.p.Create {
		if slices.ContainsFunc(list.Items, func(p corev1.Pod) bool { return p.Name == pp.Name }) {
			on = append(on, pp.Node)
		}
	}
	if len(on) == 0 {
		return fmt.Sprintf("0/%d pods created", len(r.p.Create)), nil
	}
	return fmt.Sprintf("%d/%d pods created (on %s)", len(on), len(r.p.Create), strings.Join(on, ", ")), nil
}

// waitStep waits for every pod's verdict, up to the timeout, and then gives each its verdict.
func (r *verifyRun) waitStep(ctx context.Context, progress func(health.Progress)) (runner.Outcome, error) {
	err := r.wait(ctx, progress)
	switch {
	case ctx.Err() != nil && !runner.Interrupted(ctx):
		// Not Ctrl-C: the lock was lost (the cause says so) or the run's deadline passed.
		return runner.Outcome{}, fmt.Errorf("stopped: %w", context.Cause(ctx))
	case ctx.Err() != nil:
		return runner.Outcome{}, ctx.Err()
	case err != nil && !errors.Is(err, context.DeadlineExceeded):
		return runner.Outcome{}, err
	}
	return r.verdicts(ctx)
}

// waitState is what an interrupted wait had seen: it changed nothing.
func (r *verifyRun) waitState(context.Context) (string, error) {
	var seen []string
	for _, pp := range r.p.Create {
		c := r.created[pp.Name]
		switch {
		case c == nil:
		case c.nv.Outcome != "":
			seen = append(seen, pp.Node+" "+string(c.nv.Outcome))
		case c.nv.Reason != "":
			seen = append(seen, pp.Node+" waiting ("+c.nv.Reason+")")
		default:
			seen = append(seen, pp.Node+" waiting")
		}
	}
	return "nothing changed (it was waiting): " + strings.Join(seen, "; "), nil
}

func (r *verifyRun) runSelector() string { return labels.Set{VerifyRunLabel: r.p.RunID}.String() }

// deleteCreated deletes the run's pods as a step of its own, after the plan's steps however they
// ended, and returns its result. It has its own bounded context (the run's may be cancelled), and its
// events carry no place in the plan: it is not one of the steps an interrupt counts.
func (r *verifyRun) deleteCreated(ctx context.Context) (runner.StepResult, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	sink := event.Or(r.v.Sink)
	rn := &runner.Runner{Sink: event.SinkFunc(func(e event.Event) {
		e.Index, e.Count = 0, 0
		sink.Event(e)
	})}
	cleanup := fmt.Sprintf("kubectl delete pods%s -n %s -l %s (or the next gpuctl verify removes them)", templatesKind(r.p), r.p.Namespace, r.runSelector())
	err := rn.Run(ctx, []runner.Step{{ID: verifyStepDelete, Title: "Delete this run's pods", Do: r.deleteRunPods, Hint: cleanup}})
	if err != nil {
		err = fmt.Errorf("%w: %w; they may hold GPUs: remove them with %s", ErrPodsLeft, err, cleanup)
	}
	return rn.Results[0], err
}

// templatesKind is ",resourceclaimtemplates" for kubectl when the plan creates a template.
func templatesKind(p *plan.VerifyPlan) string {
	if len(p.ClaimTemplates) > 0 {
		return ",resourceclaimtemplates"
	}
	return ""
}

// deleteRunPods deletes those of the plan's DeleteAtEnd that carry this run's label, by the UIDs they
// have, and waits until they are gone.
func (r *verifyRun) deleteRunPods(ctx context.Context, _ func(health.Progress)) (runner.Outcome, error) {
	list, err := r.pods.List(ctx, metav1.ListOptions{LabelSelector: r.runSelector()})
	if err != nil {
		return runner.Outcome{}, fmt.Errorf("list the run's pods: %w", err)
	}
	var targets []podTarget
	for _, p := range list.Items {
		if slices.Contains(r.p.DeleteAtEnd, p.Name) {
			targets = append(targets, podTarget{name: p.Name, uid: p.UID})
		}
	}
	deleted, err := deletePods(ctx, r.v.Clients.Kube, r.pods, r.runSelector(), targets, r.skipped)
	for _, name := range r.p.DeleteAtEnd {
		if slices.Contains(deleted, name) {
			r.res.Done.DeleteAtEnd = append(r.res.Done.DeleteAtEnd, name)
		}
	}
	r.res.Removed = r.res.Done.DeleteAtEnd
	if err != nil {
		return runner.Outcome{}, err
	}
	// The templates once the pods are gone (Kubernetes' resourceclaim controller deletes the claims
	// it made from them for the pods); only those this run created, by the UIDs they had.
	var templates []string
	for _, name := range r.p.DeleteClaimTemplatesAtEnd {
		uid, ok := r.templates[name]
		if !ok {
			continue
		}
		gone, err := r.deleteTemplate(ctx, name, uid)
		if err != nil {
			return runner.Outcome{}, err
		}
		if gone {
			templates = append(templates, name)
			r.res.Done.DeleteClaimTemplatesAtEnd = append(r.res.Done.DeleteClaimTemplatesAtEnd, name)
			r.res.RemovedClaimTemplates = append(r.res.RemovedClaimTemplates, name)
		}
	}
	switch {
	case len(deleted) == 0 && len(templates) == 0:
		return runner.Outcome{Skipped: true, Message: "none of the run's pods exists"}, nil
	case len(templates) > 0:
		return runner.Outcome{Changed: true, Message: fmt.Sprintf("removed %d verify pod(s) and %d ResourceClaimTemplate(s) from %s", len(deleted), len(templates), r.p.Namespace)}, nil
	}
	return runner.Outcome{Changed: true, Message: fmt.Sprintf("removed %d verify pod(s) from %s", len(deleted), r.p.Namespace)}, nil
}
