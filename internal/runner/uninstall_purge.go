package runner

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/record"
)

func (u *Uninstaller) purgeCRDs(ctx context.Context, progress func(string)) (Outcome, error) {
	if u.Record == nil {
		return Outcome{Skipped: true, Message: "no install record: gpuctl cannot tell the CRDs it created from ones it found"}, nil
	}
	crds := u.Clients.Extensions.ApiextensionsV1().CustomResourceDefinitions()
	var deleted []string
	var names []string
	if u.p.Purge != nil {
		names = u.p.Purge.CRDs
	}
	for _, name := range names {
		err := crds.Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("delete CRD %s: %w", name, err)
		}
		deleted = append(deleted, name)
	}
	ri := u.Clients.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, name := range deleted {
		progress("waiting for CRD " + name + " to go")
		if err := u.waitGone(ctx, ri, "CustomResourceDefinition", name, ""); err != nil {
			return Outcome{}, err
		}
	}
	if len(deleted) == 0 {
		return Outcome{Skipped: true, Message: "none left"}, nil
	}
	u.Clients.Refresh()
	return Outcome{Changed: true, Message: fmt.Sprintf("deleted %d: %s", len(deleted), strings.Join(deleted, ", "))}, nil
}

// purgeObjects deletes the objects gpuctl created outside its releases (the NVAIE Secrets, profile
// prerequisites, the PSP RoleBinding): in a namespace gpuctl found, deleting the namespace would not.
func (u *Uninstaller) purgeObjects(ctx context.Context, progress func(string)) (Outcome, error) {
	if u.Record == nil {
		return Outcome{Skipped: true, Message: "no install record: gpuctl cannot tell the objects it created from ones it found"}, nil
	}
	type gone struct {
		ri   dynamic.ResourceInterface
		o    record.Object
		desc string
	}
	var deleted []gone
	for _, o := range u.Record.Objects {
		if !o.Created {
			continue
		}
		ri, err := recordedResource(u.Clients, o)
		if kube.Absent(err) {
			continue // its kind is no longer served: nothing of it is left
		}
		if err != nil {
			return Outcome{}, err
		}
		desc := o.Kind + " " + o.Name
		if o.Namespace != "" {
			desc = o.Kind + " " + o.Namespace + "/" + o.Name
		}
		err = ri.Delete(ctx, o.Name, metav1.DeleteOptions{})
		if kube.Absent(err) {
			continue
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("delete %s: %w", desc, err)
		}
		deleted = append(deleted, gone{ri, o, desc})
	}
	var names []string
	for _, d := range deleted {
		progress("waiting for " + d.desc + " to go")
		if err := u.waitGone(ctx, d.ri, d.o.Kind, d.o.Name, ""); err != nil {
			return Outcome{}, err
		}
		names = append(names, d.desc)
	}
	if len(names) == 0 {
		return Outcome{Skipped: true, Message: "none left"}, nil
	}
	return Outcome{Changed: true, Message: "deleted " + strings.Join(names, ", ")}, nil
}

// purgeNamespaces deletes the namespaces gpuctl created and takes gpuctl's labels off the ones it found.
func (u *Uninstaller) purgeNamespaces(ctx context.Context, progress func(string)) (Outcome, error) {
	if u.Record == nil {
		return Outcome{Skipped: true, Message: "no install record: gpuctl cannot tell the namespaces it created from ones it found"}, nil
	}
	deleted, err := u.deleteCreatedNamespaces(ctx, progress)
	if err != nil {
		return Outcome{}, err
	}
	released, err := u.releaseFoundNamespaces(ctx)
	if err != nil {
		return Outcome{}, err
	}
	var parts []string
	if len(deleted) > 0 {
		parts = append(parts, "deleted "+strings.Join(deleted, ", "))
	}
	if len(released) > 0 {
		parts = append(parts, "removed gpuctl's labels from "+strings.Join(released, ", ")+" (found, kept)")
	}
	if len(parts) == 0 {
		return Outcome{Skipped: true, Message: "none left"}, nil
	}
	return Outcome{Changed: true, Message: strings.Join(parts, "; ")}, nil
}

// deleteCreatedNamespaces deletes the namespaces the record says gpuctl created and waits until they
// are gone; it returns the ones it deleted.
func (u *Uninstaller) deleteCreatedNamespaces(ctx context.Context, progress func(string)) ([]string, error) {
	nss := u.Clients.Kube.CoreV1().Namespaces()
	var deleted []string
	for _, name := range record.CreatedNames(u.Record.Namespaces) {
		err := nss.Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("delete namespace %s: %w", name, err)
		}
		deleted = append(deleted, name)
	}
	ri := u.Clients.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	for _, name := range deleted {
		progress("waiting for namespace " + name + " to go")
		if err := u.waitGone(ctx, ri, "Namespace", name, ""); err != nil {
			return nil, err
		}
	}
	return deleted, nil
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
