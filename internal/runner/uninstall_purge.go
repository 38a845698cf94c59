package runner

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
)

// purgeResource is the dynamic client of a planned purge deletion.
func (u *Uninstaller) purgeResource(d PlannedDeletion) (dynamic.ResourceInterface, error) {
	switch d.Kind {
	case "CustomResourceDefinition":
		return u.Clients.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}), nil
	case "Namespace":
		return u.Clients.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}), nil
	}
	return record.Resource(u.Clients, record.Object{APIVersion: d.APIVersion, Kind: d.Kind, Namespace: d.Namespace, Name: d.Name})
}

// purgeDelete deletes a planned object with its UID as the precondition (an object of that name
// someone made after gpuctl's is never deleted). It says whether it deleted it, or why it kept it.
func (u *Uninstaller) purgeDelete(ctx context.Context, ri dynamic.ResourceInterface, d PlannedDeletion) (bool, string, error) {
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

// purgeStep deletes the purge's planned objects of one step, each by UID, and waits until they are
// gone. check, when set, is asked first for each and may keep it (with why).
func (u *Uninstaller) purgeStep(ctx context.Context, step string, progress func(string), check func(PlannedDeletion) (string, error)) (Outcome, error) {
	if u.Record == nil {
		return Outcome{Skipped: true, Message: "no install record: gpuctl cannot tell what it created from what it found"}, nil
	}
	type gone struct {
		ri dynamic.ResourceInterface
		d  PlannedDeletion
	}
	var deleted []gone
	var kept []string
	if u.p.Purge != nil {
		for _, k := range u.p.Purge.Kept {
			if purgeStepOf(k.Kind) == step {
				kept = append(kept, "kept: "+describe(k.Kind, k.Namespace, k.Name)+" is "+k.Why)
			}
		}
	}
	for _, d := range u.p.Purge.deletions(step) {
		if check != nil {
			why, err := check(d)
			if err != nil {
				return Outcome{}, err
			}
			if why != "" {
				kept = append(kept, why)
				continue
			}
		}
		ri, err := u.purgeResource(d)
		if kube.Absent(err) {
			continue // its kind is no longer served: nothing of it is left
		}
		if err != nil {
			return Outcome{}, err
		}
		ok, why, err := u.purgeDelete(ctx, ri, d)
		if err != nil {
			return Outcome{}, err
		}
		if why != "" {
			kept = append(kept, why)
		}
		if ok {
			deleted = append(deleted, gone{ri, d})
		}
	}
	var names []string
	for _, g := range deleted {
		progress("waiting for " + g.d.String() + " to go")
		if err := u.waitGone(ctx, g.ri, g.d.Kind, g.d.Name, g.d.UID); err != nil {
			return Outcome{}, err
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
	return Outcome{Changed: len(names) > 0, Skipped: len(names) == 0, Message: strings.Join(parts, "; ")}, nil
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
func (u *Uninstaller) purgeCRDs(ctx context.Context, progress func(string)) (Outcome, error) {
	out, err := u.purgeStep(ctx, stepPurgeCRDs, progress, nil)
	if err == nil && out.Changed {
		u.Clients.Refresh()
	}
	return out, err
}

// purgeObjects deletes the objects gpuctl created outside its releases (the NVAIE Secrets, profile
// prerequisites, the PSP RoleBinding), by UID: in a namespace gpuctl found, deleting the namespace
// would not.
func (u *Uninstaller) purgeObjects(ctx context.Context, progress func(string)) (Outcome, error) {
	return u.purgeStep(ctx, stepPurgeObjects, progress, nil)
}

// purgeNamespaces deletes the namespaces gpuctl created that hold nothing but gpuctl's objects (it
// looks again now: the run may have changed what they hold), and takes gpuctl's labels off the ones
// it found. A namespace that holds anything else stays, with a warning naming what: deleting it would
// delete that too.
func (u *Uninstaller) purgeNamespaces(ctx context.Context, progress func(string)) (Outcome, error) {
	if u.Record == nil {
		return Outcome{Skipped: true, Message: "no install record: gpuctl cannot tell the namespaces it created from ones it found"}, nil
	}
	if u.p.Purge == nil {
		return Outcome{Skipped: true, Message: "nothing planned"}, nil
	}
	if u.p.Purge.ours == nil {
		u.p.Purge.ours = map[types.UID]bool{}
	}
	u.keptNamespaces = nil
	for _, k := range u.p.Purge.KeptNamespaces {
		u.keepNamespace(k)
	}
	out, err := u.purgeStep(ctx, stepPurgeNamespaces, progress, func(d PlannedDeletion) (string, error) {
		foreign, err := u.foreignIn(ctx, d.Name, u.p.Purge.ours, u.rels)
		if err != nil || len(foreign) == 0 {
			return "", err
		}
		k := keptNamespace(d.Name, foreign)
		u.keepNamespace(k)
		return "kept " + k.String(), nil
	})
	if err != nil {
		return Outcome{}, err
	}
	released, err := u.releaseFoundNamespaces(ctx)
	if err != nil {
		return Outcome{}, err
	}
	parts := []string{out.Message}
	if out.Message == "none left" && (len(released) > 0 || len(u.p.Purge.KeptNamespaces) > 0) {
		parts = nil
	}
	if len(released) > 0 {
		parts = append(parts, "removed gpuctl's labels from "+strings.Join(released, ", ")+" (found, kept)")
		out.Changed, out.Skipped = true, false
	}
	for _, k := range u.p.Purge.KeptNamespaces {
		parts = append(parts, "kept "+k.String())
	}
	out.Message = strings.Join(parts, "; ")
	return out, nil
}

// keepNamespace notes a namespace gpuctl created that --purge keeps, for the record, and warns.
func (u *Uninstaller) keepNamespace(k KeptNamespace) {
	u.keptNamespaces = append(u.keptNamespaces, k)
	if u.Sink != nil {
		u.Sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Message: "uninstall --purge keeps " + k.String() +
			": move or delete those, then run gpuctl uninstall --purge again to delete it"})
	}
}

// releaseFoundNamespaces takes gpuctl's labels (Pod Security Admission's privileged levels) off the
// namespaces the record says gpuctl found, which stay: applying the bare namespace as gpuctl's field
// manager releases the fields only gpuctl owns, and the API server removes them; a label someone else
// also set stays (https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management).
// It returns the namespaces it applied.
func (u *Uninstaller) releaseFoundNamespaces(ctx context.Context) ([]string, error) {
	nss := u.Clients.Kube.CoreV1().Namespaces()
	var released []string
	for _, o := range u.Record.Namespaces {
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
