package step

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// objectsKind server-side applies a step's Objects (the namespace, platform prerequisites) under
// gpuctl's field manager.
type objectsKind struct{}

// Do applies the objects, saying what became of each.
func (objectsKind) Do(ctx context.Context, x *executor, s *plan.Step, _ func(health.Progress)) (runner.Outcome, error) {
	return applyObjects(ctx, x.clients, s.Objects)
}

// Writes: what gpuctl's server-side apply would do with each object, asked as a dry run.
func (objectsKind) Writes(ctx context.Context, l *lister, s *plan.Step) error {
	return l.objects(ctx, s.ID, s.Objects)
}

func (objectsKind) State(ctx context.Context, x *executor, s *plan.Step) (string, error) {
	return objectsState(ctx, x.clients, s.Objects)
}

func (objectsKind) Explained() bool { return false }

// Needs: nothing beyond the objects themselves, which the permission check reads from the render.
func (objectsKind) Needs(*plan.Step, string) []preflight.Access { return nil }

// Recorded: the Namespaces by name, every other object by what it is.
func (objectsKind) Recorded(s *plan.Step) (Recorded, error) {
	var r Recorded
	for _, o := range s.Objects {
		u := unstructured.Unstructured{Object: o}
		if u.GetKind() == "Namespace" && u.GetAPIVersion() == "v1" {
			r.Namespaces = append(r.Namespaces, u.GetName())
			continue
		}
		r.Objects = append(r.Objects, record.Object{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Name: u.GetName(), Namespace: u.GetNamespace()})
	}
	return r, nil
}

func (objectsKind) Rendered(s *plan.Step) Rendered { return Rendered{Objects: s.Objects} }

// Exported: the objects, written as they are applied.
func (objectsKind) Exported(s *plan.Step) Exported {
	if s.Skip != "" {
		return Exported{}
	}
	var e Exported
	for _, o := range s.Objects {
		e.Objects = append(e.Objects, ExportedObject{Object: o})
	}
	return e
}

// applyObjects server-side applies objs, saying what became of each.
func applyObjects(ctx context.Context, clients *kube.Clients, objs []map[string]any) (runner.Outcome, error) {
	var us []*unstructured.Unstructured
	for _, o := range objs {
		us = append(us, &unstructured.Unstructured{Object: o})
	}
	res, err := (&kube.Apply{Dynamic: clients.Dynamic, Mapper: clients.Mapper, Objects: us}).Run(ctx)
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

// objects lists the applies of objs, each decided by a server-side dry run of gpuctl's apply.
func (l *lister) objects(ctx context.Context, step string, objs []map[string]any) error {
	for _, o := range objs {
		u := &unstructured.Unstructured{Object: o}
		w := plan.ObjectWrite{Step: step, APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
		res, err := (&kube.Apply{Dynamic: l.clients.Dynamic, Mapper: l.clients.Mapper, Objects: []*unstructured.Unstructured{u}, DryRun: true}).Run(ctx)
		switch {
		case meta.IsNoMatchError(err):
			w.Action = plan.WriteApply // its kind is served only once an earlier step has run
		case err != nil:
			return err
		default:
			w.Action = objectAction(res[0].Action)
		}
		l.w.Objects = append(l.w.Objects, w)
	}
	return nil
}

// objectAction is the dry run's word for what an apply would do.
func objectAction(a kube.ObjectAction) string {
	switch a {
	case kube.ObjectWouldCreate, kube.ObjectCreated:
		return plan.WriteCreate
	case kube.ObjectWouldUpdate, kube.ObjectUpdated:
		return plan.WriteUpdate
	default:
		return plan.WriteUnchanged
	}
}

// objectsState says how many of objs exist, naming the missing ones.
func objectsState(ctx context.Context, clients *kube.Clients, objs []map[string]any) (string, error) {
	var missing []string
	for _, o := range objs {
		u := &unstructured.Unstructured{Object: o}
		ri, err := record.Resource(clients, record.Object{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()})
		if err == nil {
			_, err = ri.Get(ctx, u.GetName(), metav1.GetOptions{})
		}
		switch {
		case kube.Absent(err):
			missing = append(missing, u.GetKind()+" "+u.GetName())
		case err != nil:
			return "", err
		}
	}
	msg := fmt.Sprintf("%d/%d objects exist", len(objs)-len(missing), len(objs))
	if len(missing) > 0 {
		msg += " (missing: " + strings.Join(missing, ", ") + ")"
	}
	return msg, nil
}
