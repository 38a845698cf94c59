package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// executor runs a Plan's steps in order and reports each through the sink.
type executor struct {
	clients *kube.Clients
	plan    *plan.Plan
	sink    event.Sink
	// gpuNodes starts as the plan's and is replaced by what NFD labels.
	gpuNodes []string
	// extraValues are merged over a release step's values at run time (tolerations the safety check adds).
	extraValues map[string]map[string]any
	// secrets are the Secret objects of KindSecrets steps, read before the run (their contents never
	// reach an event).
	secrets []map[string]any
	results []StepResult
	changed bool
	// releases are Helm clients by namespace.
	releases map[string]*release.Client
	// runID is this run's install Lease holder identity: release steps label what they write with it,
	// and recover only pending revisions another run wrote (internal/release Apply.RunID).
	runID string
}

// stepOutcome is what one step reports when it ends well.
type stepOutcome struct {
	message string
	changed bool
	skipped bool
}

// stepError is a failed step's error with what helps a person: a hint and a diagnosis.
type stepError struct {
	err    error
	hint   string
	detail string
}

func (e *stepError) Error() string { return e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

func (x *executor) run(ctx context.Context) error {
	x.releases = map[string]*release.Client{}
	x.extraValues = map[string]map[string]any{}
	count := len(x.plan.Steps)
	for i := range x.plan.Steps {
		s := &x.plan.Steps[i]
		base := event.Event{Step: s.ID, Title: s.Title, Index: i + 1, Count: count}
		emit := func(e event.Event) {
			e.Step, e.Title, e.Index, e.Count, e.Time = base.Step, base.Title, base.Index, base.Count, time.Now()
			x.sink.Event(e)
		}
		if s.Skip != "" {
			emit(event.Event{Type: event.StepSkipped, Message: s.Skip})
			x.results = append(x.results, StepResult{ID: s.ID, Title: s.Title, Outcome: event.StepSkipped, Message: s.Skip})
			continue
		}
		if interrupted(ctx) {
			// Interrupted between two steps (or while a Helm write was allowed to finish).
			return x.stopped(i, nil)
		}
		emit(event.Event{Type: event.StepStarted})
		lastProgress := ""
		out, err := x.step(ctx, s, func(p health.Progress) {
			lastProgress = p.Message
			emit(event.Event{Type: event.StepProgress, Message: p.Message, Done: p.Done, Total: p.Total, Pending: p.Pending})
		})
		if err != nil && interrupted(ctx) {
			// Every wait and write gives up on a cancelled context, whatever error it wraps; what the
			// user needs is what this step left behind, read back from the cluster.
			state := x.stateOf(ctx, s, lastProgress)
			emit(event.Event{Type: event.StepInterrupted, Message: state, Hint: ResumeHint})
			r := StepResult{ID: s.ID, Title: s.Title, Outcome: event.StepInterrupted, Message: state}
			x.results = append(x.results, r)
			return x.stopped(i, &r)
		}
		if err != nil {
			ev := event.Event{Type: event.StepFailed, Err: err.Error()}
			var se *stepError
			if errors.As(err, &se) {
				ev.Hint, ev.Detail = se.hint, se.detail
			}
			var stuck *health.StuckError
			if errors.As(err, &stuck) {
				ev.Hint = stuck.Hint
				if ev.Hint == "" && len(stuck.Report.Hints) > 0 {
					ev.Hint = stuck.Report.Hints[0].Message
				}
				ev.Detail = stuck.Report.String()
			}
			switch s.Kind {
			case plan.KindWaitValidators, plan.KindWaitAllocatable, plan.KindWaitPolicy:
				if !errors.Is(err, context.Canceled) {
					detail, hint := x.operatorDiagnosis(ctx)
					if ev.Detail != "" {
						ev.Detail = strings.TrimRight(ev.Detail, "\n") + "\n"
					}
					ev.Detail = strings.TrimRight(ev.Detail+detail, "\n")
					if hint != "" {
						ev.Hint = hint
					}
				}
			}
			emit(ev)
			x.results = append(x.results, StepResult{ID: s.ID, Title: s.Title, Outcome: event.StepFailed, Message: ev.Err})
			return fmt.Errorf("%s: %w", strings.ToLower(s.Title[:1])+s.Title[1:], err)
		}
		typ := event.StepSucceeded
		if out.skipped {
			typ = event.StepSkipped
		}
		emit(event.Event{Type: typ, Message: out.message})
		x.changed = x.changed || out.changed
		x.results = append(x.results, StepResult{ID: s.ID, Title: s.Title, Outcome: typ, Message: out.message, Changed: out.changed})
	}
	return nil
}

func (x *executor) waiter(progress func(health.Progress)) *health.Waiter {
	return &health.Waiter{Kube: x.clients.Kube, Dynamic: x.clients.Dynamic, OnProgress: progress, Namespace: x.plan.Namespace}
}

func (x *executor) step(ctx context.Context, s *plan.Step, progress func(health.Progress)) (stepOutcome, error) {
	switch s.Kind {
	case plan.KindObjects:
		return x.objects(ctx, s)
	case plan.KindSecrets:
		return x.objects(ctx, &plan.Step{Objects: x.secrets})
	case plan.KindCRDs:
		return x.crds(ctx, s)
	case plan.KindRelease:
		return x.release(ctx, s)
	case plan.KindWaitNFD:
		return x.waitNFD(ctx, progress)
	case plan.KindSafety:
		return x.safety(ctx, s)
	case plan.KindTaint:
		return x.taint(ctx, s)
	case plan.KindWaitToleration:
		return x.waitToleration(ctx, progress)
	case plan.KindWaitOperator:
		err := x.waiter(progress).DeploymentAvailable(ctx, x.plan.Namespace, s.Target)
		return stepOutcome{message: "Deployment " + s.Target + " is Available"}, err
	case plan.KindWaitValidators:
		validated, err := x.waiter(progress).ValidatorsReady(ctx, x.plan.Namespace, x.gpuNodes)
		if err == nil {
			// The operator may have labelled GPU nodes NFD had not when the earlier steps ran.
			x.gpuNodes = sortedUnique(append(slices.Clone(x.gpuNodes), validated...))
		}
		return stepOutcome{message: fmt.Sprintf("%d/%d GPU nodes validated", len(validated), len(x.gpuNodes))}, err
	case plan.KindWaitAllocatable:
		err := x.waiter(progress).GPUsAllocatable(ctx, x.gpuNodes)
		return stepOutcome{message: fmt.Sprintf("nvidia.com/gpu allocatable on %d nodes", len(x.gpuNodes))}, err
	case plan.KindWaitCSV:
		return x.waitCSV(ctx, s, progress)
	case plan.KindApprove:
		return x.approve(ctx, s, progress)
	case plan.KindClusterPolicy:
		return x.clusterPolicy(ctx, s)
	case plan.KindPSP:
		return x.psp(ctx, s)
	case plan.KindWaitPolicy:
		err := x.waiter(progress).ClusterPolicyReady(ctx, s.Target)
		return stepOutcome{message: "ready (Reconciled)"}, err
	default:
		return stepOutcome{}, fmt.Errorf("unknown step kind %q", s.Kind)
	}
}

func (x *executor) objects(ctx context.Context, s *plan.Step) (stepOutcome, error) {
	var objs []*unstructured.Unstructured
	for _, o := range s.Objects {
		objs = append(objs, &unstructured.Unstructured{Object: o})
	}
	res, err := (&kube.Apply{Dynamic: x.clients.Dynamic, Mapper: x.clients.Mapper, Objects: objs}).Run(ctx)
	if err != nil {
		return stepOutcome{}, err
	}
	var parts []string
	changed := false
	for _, r := range res {
		parts = append(parts, r.String())
		changed = changed || r.Action != kube.ObjectUnchanged
	}
	return stepOutcome{message: strings.Join(parts, ", "), changed: changed}, nil
}

func (x *executor) crds(ctx context.Context, s *plan.Step) (stepOutcome, error) {
	var total []kube.CRDResult
	for _, name := range s.Charts {
		crds, version, err := render.ChartCRDs(name, s.ChartReleases[name])
		if err != nil {
			return stepOutcome{}, err
		}
		var known map[string][]*apiextensionsv1.CustomResourceDefinition
		if name == plan.OperatorRelease {
			if known, err = render.OperatorReleaseCRDs(); err != nil {
				return stepOutcome{}, err
			}
		}
		res, err := (&kube.ApplyCRDs{Client: x.clients.Extensions, Dynamic: x.clients.Dynamic, CRDs: crds, Version: version, Releases: known}).Run(ctx)
		if err != nil {
			return stepOutcome{}, err
		}
		total = append(total, res...)
	}
	byAction := map[kube.CRDAction][]string{}
	var kept []string
	for _, r := range total {
		byAction[r.Action] = append(byAction[r.Action], r.Name)
		if r.Action == kube.CRDKept {
			kept = append(kept, r.Name+": "+r.Reason)
		}
	}
	for _, k := range kept {
		x.sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Message: "kept CRD " + k})
	}
	var parts []string
	for _, a := range []kube.CRDAction{kube.CRDCreated, kube.CRDUpdated, kube.CRDUnchanged, kube.CRDKept} {
		if n := len(byAction[a]); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, a))
		}
	}
	changed := len(byAction[kube.CRDCreated])+len(byAction[kube.CRDUpdated]) > 0
	if changed {
		x.clients.Refresh()
	}
	return stepOutcome{message: strings.Join(parts, ", "), changed: changed}, nil
}

func (x *executor) release(ctx context.Context, s *plan.Step) (stepOutcome, error) {
	ch, err := render.LoadChart(s.Release.Chart, s.Release.AppVersion)
	if err != nil {
		return stepOutcome{}, err
	}
	values := s.Release.Values
	if extra := x.extraValues[s.ID]; extra != nil {
		values = plan.MergeValues(values, extra)
	}
	if s.Release.Chart == plan.OLMChart {
		if values, err = x.olmValues(ctx, values); err != nil {
			return stepOutcome{}, err
		}
	}
	rc, err := x.releaseClient(s.Release.Namespace)
	if err != nil {
		return stepOutcome{}, err
	}
	res, err := x.applyRelease(ctx, &release.Apply{Client: rc, Name: s.Release.Name, Chart: ch, Values: values, RunID: x.runID})
	if busy := (*release.BusyError)(nil); errors.As(err, &busy) {
		return stepOutcome{}, &stepError{err: err, hint: busy.Hint()}
	}
	if err != nil {
		return stepOutcome{}, &stepError{err: err, hint: "helm history " + s.Release.Name + " -n " + x.plan.Namespace + " shows the release's revisions"}
	}
	if res.Recovered != "" {
		x.sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Message: "release " + s.Release.Name + ": " + res.Recovered})
	}
	msg := fmt.Sprintf("%s revision %d (%s %s)", res.Outcome, res.Release.Revision, res.Release.Chart, res.Release.ChartVersion)
	return stepOutcome{message: msg, changed: res.Outcome != release.Unchanged || res.Recovered != ""}, nil
}

// applyRelease runs a Helm write to its end even when the run is interrupted meanwhile: Helm gives
// up on a cancelled context by returning at once while its write goes on in the background, and the
// process exits under it, leaving the release pending-install or pending-upgrade (or marked failed
// although its objects were applied). Letting the write finish (it does not wait for the workloads)
// leaves a release in a state the next run, and Helm's CLI, take as it is. The run's deadline still
// bounds it, and a second Ctrl-C ends the process at once (cmd/gpuctl).
func (x *executor) applyRelease(ctx context.Context, a *release.Apply) (*release.Result, error) {
	hctx := context.WithoutCancel(ctx)
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		hctx, cancel = context.WithDeadline(hctx, deadline)
		defer cancel()
	}
	type result struct {
		res *release.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := a.Run(hctx)
		done <- result{res, err}
	}()
	select {
	case r := <-done:
		return r.res, r.err
	case <-ctx.Done():
	}
	if interrupted(ctx) {
		x.sink.Event(event.Event{Time: time.Now(), Type: event.Warning,
			Message: "interrupted: letting Helm finish writing release " + a.Name + " so that it is not left pending",
			Hint:    "press Ctrl-C again to stop at once"})
	}
	r := <-done
	return r.res, r.err
}

func (x *executor) taint(ctx context.Context, s *plan.Step) (stepOutcome, error) {
	if len(x.gpuNodes) == 0 {
		return stepOutcome{skipped: true, message: "no GPU nodes"}, nil
	}
	t := corev1.Taint{Key: s.Taint.Key, Value: s.Taint.Value, Effect: corev1.TaintEffect(s.Taint.Effect)}
	res, err := (&taint.Taint{Client: x.clients.Kube, Taint: t}).Run(ctx, x.gpuNodes)
	if err != nil {
		return stepOutcome{}, err
	}
	added, present := res.Count(taint.ActionAdded), res.Count(taint.ActionAlreadyPresent)
	msg := fmt.Sprintf("%d tainted", added)
	if present > 0 {
		msg += fmt.Sprintf(", %d already were", present)
	}
	return stepOutcome{message: msg, changed: added > 0}, nil
}

func sortedUnique(names []string) []string {
	out := slices.Clone(names)
	sort.Strings(out)
	return slices.Compact(out)
}

// releaseClient is the Helm client of a namespace (releases are stored where they are installed).
func (x *executor) releaseClient(ns string) (*release.Client, error) {
	if ns == "" {
		ns = x.plan.Namespace
	}
	if rc, ok := x.releases[ns]; ok {
		return rc, nil
	}
	rc, err := release.New(x.clients.Getter, ns, nil)
	if err != nil {
		return nil, err
	}
	x.releases[ns] = rc
	return rc, nil
}

// StepResult is the outcome of one step.
type StepResult struct {
	ID      string     `json:"id"`
	Title   string     `json:"title"`
	Outcome event.Type `json:"outcome"`
	Message string     `json:"message,omitempty"`
	Changed bool       `json:"changed"`
}
