package step

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// releaseKind installs or upgrades a Helm release of an embedded chart through Helm's SDK
// (internal/release), labelled as gpuctl's; an adopted release that ran NVIDIA's NFD subchart keeps
// that NFD running (kind_release_keep.go).
type releaseKind struct{}

func (releaseKind) Do(ctx context.Context, x *executor, s *plan.Step, _ func(health.Progress)) (runner.Outcome, error) {
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

// Writes: the release's operation and the objects Helm would apply and delete.
func (releaseKind) Writes(ctx context.Context, l *lister, s *plan.Step) error {
	r := s.Release
	if k := r.KeepSubchart; k != nil {
		l.w.Rules = append(l.w.Rules, fmt.Sprintf("before release %s is upgraded, each object of its %s subchart gets helm.sh/resource-policy: keep (and %s), so the upgrade leaves it running outside the release",
			r.Name, k.Chart, plan.KeptFromAnnotation))
	}
	ns := l.plan.ReleaseNamespace(r)
	ch, err := render.LoadChart(r.Chart, r.AppVersion)
	if err != nil {
		return err
	}
	values := r.Values
	if r.Chart == plan.OLMChart {
		// The Subscription's channel and CSV as the run resolves them from the catalog.
		if values, err = OLMValues(ctx, l.clients, values); err != nil {
			return err
		}
	}
	rc, err := l.releases.In(ns)
	if err != nil {
		return err
	}
	pv, err := rc.PreviewApply(ctx, r.Name, ch, values)
	if err != nil {
		return err
	}
	op := plan.ReleaseUnchanged
	switch pv.Outcome {
	case release.WouldInstall:
		op = plan.ReleaseInstall
	case release.WouldUpgrade:
		op = plan.ReleaseUpgrade
	}
	l.w.Releases = append(l.w.Releases, plan.ReleaseWrite{Step: s.ID, Name: r.Name, Namespace: ns, Chart: r.Chart, ChartVersion: r.ChartVersion,
		Operation: op, Revision: pv.Revision, FromRevision: pv.From, Recreate: pv.Missing})
	if op == plan.ReleaseUnchanged {
		return nil
	}
	return l.releaseObjects(ctx, s, ch, pv, op, ns)
}

// releaseObjects lists the objects a release's install or upgrade applies, and those an upgrade
// deletes (by their UID now), from the manifest Helm would apply and the deployed one.
func (l *lister) releaseObjects(ctx context.Context, s *plan.Step, ch *chart.Chart, pv *release.Preview, op, ns string) error {
	scope := newScopes(l.clients.Mapper, ch)
	rendered, err := l.manifestObjects(pv.Manifest, ns, scope)
	if err != nil {
		return fmt.Errorf("release %s: %w", s.Release.Name, err)
	}
	deployed, err := l.manifestObjects(pv.Deployed, ns, scope)
	if err != nil {
		return fmt.Errorf("release %s, deployed: %w", s.Release.Name, err)
	}
	writes, gone := plan.ReleaseObjects(s.ID, op, rendered, deployed, pv.Missing)
	l.w.Objects = append(l.w.Objects, writes...)
	for _, o := range gone {
		uid, err := currentUID(ctx, l.clients.Dynamic, l.clients.Mapper, o)
		if err != nil {
			return err
		}
		if uid != "" {
			l.w.Deletes = append(l.w.Deletes, plan.ObjectDelete{Step: s.ID, APIVersion: o.GetAPIVersion(), Kind: o.GetKind(),
				Namespace: o.GetNamespace(), Name: o.GetName(), UID: types.UID(uid)})
		}
	}
	return nil
}

// manifestObjects decodes a release manifest, giving each namespaced object without a namespace the
// release's, as Helm does when it applies them.
func (l *lister) manifestObjects(manifest, ns string, scope *scopes) ([]*unstructured.Unstructured, error) {
	objs, err := render.DecodeManifest(manifest)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetNamespace() == "" && scope.namespaced(o.GroupVersionKind()) {
			o.SetNamespace(ns)
		}
	}
	return objs, nil
}

// scopes tells whether a kind is namespaced: from the API server, or, for a kind whose CRD is not
// served yet, from the CRDs the chart carries.
type scopes struct {
	mapper meta.RESTMapper
	crds   map[schema.GroupKind]bool
}

func newScopes(mapper meta.RESTMapper, ch *chart.Chart) *scopes {
	sc := &scopes{mapper: mapper, crds: map[schema.GroupKind]bool{}}
	for _, f := range ch.CRDObjects() {
		objs, err := render.DecodeManifest(string(f.File.Data))
		if err != nil {
			continue // the run's CRD step reads them too and says what is wrong
		}
		for _, o := range objs {
			group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
			sc.crds[schema.GroupKind{Group: group, Kind: kind}] = scope == string(apiextensionsv1.NamespaceScoped)
		}
	}
	return sc
}

func (sc *scopes) namespaced(gvk schema.GroupVersionKind) bool {
	if m, err := sc.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		return m.Scope.Name() == meta.RESTScopeNameNamespace
	}
	if ns, ok := sc.crds[gvk.GroupKind()]; ok {
		return ns
	}
	return true // Helm gives an unknown kind the release's namespace
}

// currentUID is the UID of the object named like o, "" when there is none (or its kind is not served).
func currentUID(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) (string, error) {
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	have, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(have.GetUID()), nil
}

// State is the status and revision of the release's newest revision.
func (releaseKind) State(_ context.Context, x *executor, s *plan.Step) (string, error) {
	rel := s.Release
	rc, err := x.releaseClient(rel.Namespace)
	if err != nil {
		return "", err
	}
	r, err := rc.Last(rel.Name)
	if err != nil {
		return "", err
	}
	if r == nil {
		return "release " + rel.Name + ": not installed", nil
	}
	return fmt.Sprintf("release %s: %s revision %d", r.Name, r.Status, r.Revision), nil
}

func (releaseKind) Explained() bool { return false }

// Needs: Helm keeps each release revision in a Secret in the release namespace (its default driver).
func (releaseKind) Needs(s *plan.Step, namespace string) []preflight.Access {
	ns := s.Release.Namespace
	if ns == "" {
		ns = namespace
	}
	return access(ns, "", "secrets", "get", "list", "create", "update", "delete")
}

// Recorded: nothing here; the record names the plan's releases from Helm's storage after the run.
func (releaseKind) Recorded(*plan.Step) (Recorded, error) { return Recorded{}, nil }

func (releaseKind) Rendered(s *plan.Step) Rendered { return Rendered{Release: s.Release} }

func (releaseKind) Exported(s *plan.Step) Exported {
	if s.Skip != "" {
		return Exported{}
	}
	return Exported{Release: s.Release}
}
