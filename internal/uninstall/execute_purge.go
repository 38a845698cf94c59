package uninstall

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// purgeResource is the dynamic client of a planned purge deletion.
func (e *execution) purgeResource(d PlannedDeletion) (dynamic.ResourceInterface, error) {
	switch d.Kind {
	case "CustomResourceDefinition":
		return e.Clients.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}), nil
	case "Namespace":
		return e.Clients.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}), nil
	}
	return record.Resource(e.Clients, record.Object{APIVersion: d.APIVersion, Kind: d.Kind, Namespace: d.Namespace, Name: d.Name})
}

// purgeDelete deletes a planned object with its UID as the precondition (an object of that name
// someone made after gpuctl's is never deleted). It says whether it deleted it, or why it kept it.
func (e *execution) purgeDelete(ctx context.Context, ri dynamic.ResourceInterface, d PlannedDeletion) (bool, string, error) {
	uid := d.UID
	err := ri.Delete(ctx, d.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case kube.Absent(err):
		return false, "", nil
	case apierrors.IsConflict(err):
		return false, "kept: " + d.String() + " is " + notTheOne, nil
	case err != nil:
		return false, "", fmt.Errorf("delete %s: %w", d, err)
	}
	return true, "", nil
}

// purged is a planned purge deletion the run made, with its client to wait on.
type purged struct {
	ri dynamic.ResourceInterface
	d  PlannedDeletion
}

// purgeStep deletes the purge's planned objects of one step, each by UID, and waits until they are
// gone. check, when set, is asked first for each and may keep it (with why).
func (e *execution) purgeStep(ctx context.Context, step string, progress func(string), check func(context.Context, PlannedDeletion) (string, error)) (runner.Outcome, error) {
	if e.p.record == nil {
		return runner.Outcome{Skipped: true, Message: "no install record: gpuctl cannot tell what it created from what it found"}, nil
	}
	deleted, kept, err := e.purgeDeletions(ctx, step, check)
	if err != nil {
		return runner.Outcome{}, err
	}
	var names []string
	for _, g := range deleted {
		progress("waiting for " + g.d.String() + " to go")
		if err := e.waitGone(ctx, g.ri, g.d.Kind, g.d.Name, g.d.UID); err != nil {
			return runner.Outcome{}, err
		}
		names = append(names, g.d.String())
	}
	var parts []string
	if len(names) > 0 {
		parts = append(parts, fmt.Sprintf("deleted %d: %s", len(names), strings.Join(names, ", ")))
	}
	if parts = append(parts, kept...); len(parts) == 0 {
		parts = []string{"none left"}
	}
	return runner.Outcome{Changed: len(names) > 0, Skipped: len(names) == 0, Message: strings.Join(parts, "; ")}, nil
}

// purgeDeletions deletes the purge's planned objects of one step (check, when set, may keep one),
// and says what it deleted and what it kept, the plan's kept objects of the step first.
func (e *execution) purgeDeletions(ctx context.Context, step string, check func(context.Context, PlannedDeletion) (string, error)) ([]purged, []string, error) {
	var deleted []purged
	var kept []string
	if e.p.Purge != nil {
		for _, k := range e.p.Purge.Kept {
			if purgeStepOf(k.Kind) == step {
				kept = append(kept, "kept: "+describe(k.Kind, k.Namespace, k.Name)+" is "+k.Why)
			}
		}
	}
	for _, d := range e.p.Purge.deletions(step) {
		if check != nil {
			why, err := check(ctx, d)
			if err != nil {
				return nil, nil, err
			}
			if why != "" {
				kept = append(kept, why)
				continue
			}
		}
		ri, err := e.purgeResource(d)
		if kube.Absent(err) {
			continue // its kind is no longer served: nothing of it is left
		}
		if err != nil {
			return nil, nil, err
		}
		ok, why, err := e.purgeDelete(ctx, ri, d)
		if err != nil {
			return nil, nil, err
		}
		if why != "" {
			kept = append(kept, why)
		}
		if ok {
			deleted = append(deleted, purged{ri, d})
		}
	}
	return deleted, kept, nil
}

// purgeStepOf is the purge step that deletes objects of kind.
func purgeStepOf(kind string) string {
	switch kind {
	case "CustomResourceDefinition":
		return stepPurgeCRDs
	case "Namespace":
		return stepPurgeNamespaces
	}
	return stepPurgeObjects
}

// purgeCRDs deletes the CRDs gpuctl created, by UID.
func (e *execution) purgeCRDs(ctx context.Context, progress func(string)) (runner.Outcome, error) {
	out, err := e.purgeStep(ctx, stepPurgeCRDs, progress, nil)
	if err == nil && out.Changed {
		e.Clients.Refresh()
	}
	return out, err
}

// purgeObjects deletes the objects gpuctl created outside its releases (the NVAIE Secrets, profile
// prerequisites, the PSP RoleBinding), by UID: in a namespace gpuctl found, deleting the namespace
// would not.
func (e *execution) purgeObjects(ctx context.Context, progress func(string)) (runner.Outcome, error) {
	return e.purgeStep(ctx, stepPurgeObjects, progress, nil)
}

// purgeNamespaces deletes the namespaces gpuctl created that hold nothing but gpuctl's objects (it
// looks again now: the run may have changed what they hold), and takes gpuctl's labels off the ones
// it found. A namespace that holds anything else stays, with a warning naming what: deleting it would
// delete that too.
func (e *execution) purgeNamespaces(ctx context.Context, progress func(string)) (runner.Outcome, error) {
	if e.p.record == nil {
		return runner.Outcome{Skipped: true, Message: "no install record: gpuctl cannot tell the namespaces it created from ones it found"}, nil
	}
	if e.p.Purge == nil {
		return runner.Outcome{Skipped: true, Message: "nothing planned"}, nil
	}
	e.keptNamespaces = nil
	for _, k := range e.p.Purge.KeptNamespaces {
		e.keepNamespace(k)
	}
	out, err := e.purgeStep(ctx, stepPurgeNamespaces, progress, e.lookAgain)
	if err != nil {
		return runner.Outcome{}, err
	}
	released, err := e.releaseFoundNamespaces(ctx)
	if err != nil {
		return runner.Outcome{}, err
	}
	parts := []string{out.Message}
	if out.Message == "none left" && (len(released) > 0 || len(e.p.Purge.KeptNamespaces) > 0) {
		parts = nil
	}
	if len(released) > 0 {
		parts = append(parts, "removed gpuctl's labels from "+strings.Join(released, ", ")+" (found, kept)")
		out.Changed, out.Skipped = true, false
	}
	for _, k := range e.p.Purge.KeptNamespaces {
		parts = append(parts, "kept "+k.String())
	}
	out.Message = strings.Join(parts, "; ")
	return out, nil
}

// lookAgain lists what the namespace d deletes holds now and judges it as the plan did, trusting
// what the plan judged gpuctl's whose owners have gone meanwhile; one that holds anything else is
// kept, and it says why ("" lets the delete go on).
func (e *execution) lookAgain(ctx context.Context, d PlannedDeletion) (string, error) {
	c, err := listNamespace(ctx, e.Clients, d.Name)
	if err != nil {
		return "", err
	}
	foreign := foreignIn(c, d.Name, e.ours, e.p.Releases)
	if len(foreign) == 0 {
		return "", nil
	}
	k := keptNamespace(d.Name, foreign)
	e.keepNamespace(k)
	return "kept " + k.String(), nil
}

// keepNamespace notes a namespace gpuctl created that --purge keeps, for the record, and warns.
func (e *execution) keepNamespace(k KeptNamespace) {
	e.keptNamespaces = append(e.keptNamespaces, k)
	if e.Sink != nil {
		e.Sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Message: "uninstall --purge keeps " + k.String() +
			": move or delete those, then run gpuctl uninstall --purge again to delete it"})
	}
}

// releaseFoundNamespaces takes gpuctl's labels (Pod Security Admission's privileged levels) off the
// namespaces the record says gpuctl found, which stay: applying the bare namespace as gpuctl's field
// manager releases the fields only gpuctl owns, and the API server removes them; a label someone else
// also set stays (https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management).
// It returns the namespaces it applied.
func (e *execution) releaseFoundNamespaces(ctx context.Context) ([]string, error) {
	nss := e.Clients.Kube.CoreV1().Namespaces()
	var released []string
	for _, o := range e.p.record.Namespaces {
		if o.Created {
			continue
		}
		ns, err := nss.Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read namespace %s: %w", o.Name, err)
		}
		if !slices.ContainsFunc(ns.ManagedFields, func(m metav1.ManagedFieldsEntry) bool {
			return m.Manager == kube.FieldManager && m.Operation == metav1.ManagedFieldsOperationApply
		}) {
			continue
		}
		bare := []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":` + strconv.Quote(o.Name) + `}}`)
		if _, err := nss.Patch(ctx, o.Name, types.ApplyPatchType, bare, metav1.PatchOptions{FieldManager: kube.FieldManager, Force: ptr.To(true)}); err != nil {
			return nil, fmt.Errorf("remove gpuctl's labels from namespace %s: %w", o.Name, err)
		}
		released = append(released, o.Name)
	}
	return released, nil
}
