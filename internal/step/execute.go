package step

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
	"github.com/gpuctl/gpuctl/internal/runner"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// executor carries out the steps of an install Plan, one handler per step kind.
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
	// releases are Helm clients by namespace.
	releases map[string]*release.Client
	// labelsBefore are the nodes' stack labels before gpuctl's first install (the record's), which a
	// label gpuctl no longer wants goes back to.
	labelsBefore map[string]record.NodeMetadata
	// runID is this run's install Lease holder identity: release steps label what they write with it,
	// and recover only pending revisions another run wrote (internal/release Apply.RunID).
	runID string
}

// steps are the Plan's steps as the runner carries them out: each kind's handler, what an interrupted
// one left behind, and the operator's own diagnosis of a failed wait on the stack.
func (x *executor) steps() []runner.Step {
	out := make([]runner.Step, len(x.plan.Steps))
	for i := range x.plan.Steps {
		s := &x.plan.Steps[i]
		// The plan's step, not a copy: an earlier step may skip a later one at run time (retaint).
		out[i] = runner.Step{ID: s.ID, Title: s.Title, Skipped: func() string { return s.Skip },
			Do: func(ctx context.Context, progress func(health.Progress)) (runner.Outcome, error) {
				return x.step(ctx, s, progress)
			},
			State: func(ctx context.Context) (string, error) { return x.readState(ctx, s) },
		}
		switch s.Kind {
		case plan.KindWaitValidators, plan.KindWaitAllocatable, plan.KindWaitPolicy, plan.KindWaitGPUCluster, plan.KindWaitResourceSlices:
			out[i].Explain = x.explain
		}
	}
	return out
}

// explain adds what only the operator knows to the event of a failed wait on the GPU stack.
func (x *executor) explain(ctx context.Context, ev *event.Event) {
	detail, hint := x.operatorDiagnosis(ctx)
	if ev.Detail != "" {
		ev.Detail = strings.TrimRight(ev.Detail, "\n") + "\n"
	}
	ev.Detail = strings.TrimRight(ev.Detail+detail, "\n")
	if hint != "" {
		ev.Hint = hint
	}
}

func (x *executor) waiter(progress func(health.Progress)) *health.Waiter {
	return &health.Waiter{Kube: x.clients.Kube, Dynamic: x.clients.Dynamic, OnProgress: progress, Namespace: x.plan.Namespace}
}

func (x *executor) step(ctx context.Context, s *plan.Step, progress func(health.Progress)) (runner.Outcome, error) {
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
		return runner.Outcome{Message: "Deployment " + s.Target + " is Available"}, err
	case plan.KindWaitValidators:
		validated, err := x.waiter(progress).ValidatorsReady(ctx, x.plan.Namespace, x.gpuNodes)
		if err == nil {
			// The operator may have labelled GPU nodes NFD had not when the earlier steps ran.
			x.gpuNodes = health.SortedUniqueNames(append(slices.Clone(x.gpuNodes), validated...))
		}
		return runner.Outcome{Message: fmt.Sprintf("%d/%d GPU nodes validated", len(validated), len(x.gpuNodes))}, err
	case plan.KindWaitAllocatable:
		err := x.waiter(progress).GPUsAllocatable(ctx, x.gpuNodes)
		return runner.Outcome{Message: fmt.Sprintf("nvidia.com/gpu allocatable on %d nodes", len(x.gpuNodes))}, err
	case plan.KindWaitCSV:
		return x.waitCSV(ctx, s, progress)
	case plan.KindApprove:
		return x.approve(ctx, s, progress)
	case plan.KindClusterPolicy:
		return x.clusterPolicy(ctx, s)
	case plan.KindPSP:
		return x.psp(ctx, s)
	case plan.KindNodeLabels:
		return x.nodeLabels(ctx, s)
	case plan.KindMIGAfterGFD:
		return x.migAfterGFD(ctx, s, progress)
	case plan.KindWaitPolicy:
		err := x.waiter(progress).ClusterPolicyReady(ctx, s.Target)
		return runner.Outcome{Message: "ready (Reconciled)"}, err
	case plan.KindWaitGPUCluster:
		err := x.waiter(progress).GPUClusterReady(ctx, s.Target)
		return runner.Outcome{Message: "ready (Reconciled)"}, err
	case plan.KindWaitResourceSlices:
		err := x.waiter(progress).ResourceSlicesPublished(ctx, plan.DRADriverName, x.gpuNodes)
		return runner.Outcome{Message: fmt.Sprintf("%s ResourceSlices on %d GPU nodes", plan.DRADriverName, len(x.gpuNodes))}, err
	default:
		return runner.Outcome{}, fmt.Errorf("unknown step kind %q", s.Kind)
	}
}

func (x *executor) objects(ctx context.Context, s *plan.Step) (runner.Outcome, error) {
	var objs []*unstructured.Unstructured
	for _, o := range s.Objects {
		objs = append(objs, &unstructured.Unstructured{Object: o})
	}
	res, err := (&kube.Apply{Dynamic: x.clients.Dynamic, Mapper: x.clients.Mapper, Objects: objs}).Run(ctx)
	if err != nil {
		return runner.Outcome{}, err
	}
	var parts []string
	changed := false
	for _, r := range res {
		parts = append(parts, r.String())
		changed = changed || r.Action != kube.ObjectUnchanged
	}
	return runner.Outcome{Message: strings.Join(parts, ", "), Changed: changed}, nil
}

func (x *executor) crds(ctx context.Context, s *plan.Step) (runner.Outcome, error) {
	var total []kube.CRDResult
	for _, name := range s.Charts {
		crds, version, err := render.ChartCRDs(name, s.ChartReleases[name])
		if err != nil {
			return runner.Outcome{}, err
		}
		var known map[string][]*apiextensionsv1.CustomResourceDefinition
		if name == plan.OperatorRelease {
			if known, err = render.OperatorReleaseCRDs(); err != nil {
				return runner.Outcome{}, err
			}
		}
		res, err := (&kube.ApplyCRDs{Client: x.clients.Extensions, Dynamic: x.clients.Dynamic, CRDs: crds, Version: version, Releases: known}).Run(ctx)
		if err != nil {
			return runner.Outcome{}, err
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
	return runner.Outcome{Message: strings.Join(parts, ", "), Changed: changed}, nil
}

func (x *executor) release(ctx context.Context, s *plan.Step) (runner.Outcome, error) {
	ch, err := render.LoadChart(s.Release.Chart, s.Release.AppVersion)
	if err != nil {
		return runner.Outcome{}, err
	}
	values := s.Release.Values
	if extra := x.extraValues[s.ID]; extra != nil {
		values = plan.MergeValues(values, extra)
	}
	if s.Release.Chart == plan.OLMChart {
		if values, err = x.olmValues(ctx, values); err != nil {
			return runner.Outcome{}, err
		}
	}
	rc, err := x.releaseClient(s.Release.Namespace)
	if err != nil {
		return runner.Outcome{}, err
	}
	apply := &release.Apply{Client: rc, Name: s.Release.Name, Chart: ch, Values: values, RunID: x.runID}
	kept, err := x.keepSubchart(ctx, s, apply)
	if err != nil {
		return runner.Outcome{}, err
	}
	res, err := x.applyRelease(ctx, apply)
	if busy := (*release.BusyError)(nil); errors.As(err, &busy) {
		return runner.Outcome{}, &runner.StepError{Err: err, Hint: busy.Hint()}
	}
	if err != nil {
		return runner.Outcome{}, &runner.StepError{Err: err, Hint: "helm history " + s.Release.Name + " -n " + x.plan.Namespace + " shows the release's revisions"}
	}
	if res.Recovered != "" {
		x.sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Message: "release " + s.Release.Name + ": " + res.Recovered})
	}
	msg := fmt.Sprintf("%s revision %d (%s %s)", res.Outcome, res.Release.Revision, res.Release.Chart, res.Release.ChartVersion)
	if len(res.Recreated) > 0 {
		msg += "; recreated what was deleted: " + strings.Join(res.Recreated, ", ")
	}
	msg += kept
	return runner.Outcome{Message: msg, Changed: res.Outcome != release.Unchanged || res.Recovered != "" || kept != ""}, nil
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
	if runner.Interrupted(ctx) {
		x.sink.Event(event.Event{Time: time.Now(), Type: event.Warning,
			Message: "interrupted: letting Helm finish writing release " + a.Name + " so that it is not left pending",
			Hint:    "press Ctrl-C again to stop at once"})
	}
	r := <-done
	return r.res, r.err
}

func (x *executor) taint(ctx context.Context, s *plan.Step) (runner.Outcome, error) {
	if len(x.gpuNodes) == 0 {
		return runner.Outcome{Skipped: true, Message: "no GPU nodes"}, nil
	}
	t := corev1.Taint{Key: s.Taint.Key, Value: s.Taint.Value, Effect: corev1.TaintEffect(s.Taint.Effect)}
	res, err := (&taint.Taint{Client: x.clients.Kube, Taint: t}).Run(ctx, x.gpuNodes)
	if err != nil {
		return runner.Outcome{}, err
	}
	added, present := res.Count(taint.ActionAdded), res.Count(taint.ActionAlreadyPresent)
	msg := fmt.Sprintf("%d tainted", added)
	if present > 0 {
		msg += fmt.Sprintf(", %d already were", present)
	}
	return runner.Outcome{Message: msg, Changed: added > 0}, nil
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
