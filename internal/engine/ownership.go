package engine

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/uninstall"
)

// writeTargets are what a run would write that an engine may manage: Helm releases and the stack's
// objects (the ClusterPolicy, what uninstall deletes).
type writeTargets struct {
	releases []plan.Release
	objects  []targetObject
}

// targetObject is one object a run would write, by group, version, kind and name.
type targetObject struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
}

// installTargets are the releases an install (or upgrade) of p writes, and its ClusterPolicy. Without
// a plan (it could not be built) they are gpuctl's releases by their names in namespace.
func installTargets(p *plan.Plan, namespace string) writeTargets {
	policy := plan.ClusterPolicyName
	var t writeTargets
	if p == nil {
		t.releases = []plan.Release{{Name: plan.NFDRelease, Namespace: namespace}, {Name: plan.OperatorRelease, Namespace: namespace}}
	} else {
		for _, s := range p.Steps {
			if s.Release != nil && s.Skip == "" {
				t.releases = append(t.releases, *s.Release)
			}
		}
		if s := p.Step("wait-clusterpolicy"); s != nil && s.Target != "" {
			policy = s.Target
		}
	}
	gvr := health.ClusterPolicyResource()
	t.objects = append(t.objects, targetObject{gvk: gvr.GroupVersion().WithKind("ClusterPolicy"), name: policy})
	return t
}

// uninstallTargets are the releases and objects an uninstall plan deletes.
func uninstallTargets(p *uninstall.Plan) writeTargets {
	var t writeTargets
	if p == nil {
		return t
	}
	for _, r := range p.Releases {
		t.releases = append(t.releases, plan.Release{Name: r.Name, Namespace: r.Namespace})
	}
	for _, d := range p.Delete {
		gv, err := schema.ParseGroupVersion(d.APIVersion)
		if err != nil {
			continue
		}
		t.objects = append(t.objects, targetObject{gvk: gv.WithKind(d.Kind), namespace: d.Namespace, name: d.Name})
	}
	return t
}

// refuseOwned fails (preflight.ErrFailed wrapping an *release.OwnedError) when a GitOps engine manages a
// release or an object of t: gpuctl never writes what an engine owns, it would undo gpuctl's change
// on its next sync, or gpuctl would undo the engine's. What reads the cluster (status, verify,
// diagnose) is not asked.
func refuseOwned(ctx context.Context, clients *kube.Clients, t writeTargets, sink event.Sink) error {
	owned, err := findOwned(ctx, clients, t)
	if err != nil {
		return fmt.Errorf("find who manages the releases: %w", err)
	}
	if owned == nil {
		return nil
	}
	hint := "nothing was changed; gpuctl status, verify and diagnose still read it"
	if owned.Marked != "" {
		hint = owned.Marked + " carries " + owned.Owner.Engine + "'s mark; " + hint
	}
	sink.Event(event.Event{Time: time.Now(), Type: event.StepFailed, Step: preflightStep, Title: preflightTitle, Err: owned.Error(), Hint: hint})
	return fmt.Errorf("%w: %w", preflight.ErrFailed, owned)
}

// findOwned is the first release or object of t an engine manages (nil: none).
func findOwned(ctx context.Context, clients *kube.Clients, t writeTargets) (*release.OwnedError, error) {
	helm := release.NewClients(clients.Getter)
	for _, r := range t.releases {
		rc, err := helm.In(r.Namespace)
		if err != nil {
			return nil, err
		}
		if owned, err := rc.Owner(r.Name); err != nil || owned != nil {
			return owned, err
		}
	}
	for _, o := range t.objects {
		owned, err := objectOwner(ctx, clients, o)
		if err != nil || owned != nil {
			return owned, err
		}
	}
	return nil, ctx.Err()
}

// objectOwner reads one object's metadata and says which engine manages it; an object that is not
// there, or whose kind the cluster does not serve, has none.
func objectOwner(ctx context.Context, clients *kube.Clients, o targetObject) (*release.OwnedError, error) {
	if clients.Mapper == nil {
		return nil, fmt.Errorf("read %s %s: no REST mapper", o.gvk.Kind, o.name)
	}
	m, err := clients.Mapper.RESTMapping(o.gvk.GroupKind(), o.gvk.Version)
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	obj, err := clients.Dynamic.Resource(m.Resource).Namespace(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
	if kube.Absent(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", o.gvk.Kind, o.name, err)
	}
	id := release.ObjectID{Group: o.gvk.Group, Kind: o.gvk.Kind, Namespace: o.namespace, Name: o.name}
	owner, ok := release.OwnerOf(id, obj.GetLabels(), obj.GetAnnotations())
	if !ok {
		return nil, nil
	}
	what := o.gvk.Kind + " " + o.name
	if o.namespace != "" {
		what = o.gvk.Kind + " " + o.namespace + "/" + o.name
	}
	return &release.OwnedError{Object: what, Owner: owner}, nil
}
