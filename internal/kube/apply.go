package kube

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// ObjectAction says what Apply did with one object.
type ObjectAction string

const (
	ObjectCreated     ObjectAction = "created"
	ObjectUpdated     ObjectAction = "updated"
	ObjectUnchanged   ObjectAction = "unchanged"
	ObjectWouldCreate ObjectAction = "would-create"
	ObjectWouldUpdate ObjectAction = "would-update"
)

// ObjectResult is the outcome for one object.
type ObjectResult struct {
	Kind      string       `json:"kind"`
	Namespace string       `json:"namespace,omitempty"`
	Name      string       `json:"name"`
	Action    ObjectAction `json:"action"`
}

func (r ObjectResult) String() string {
	if r.Namespace != "" {
		return fmt.Sprintf("%s %s/%s %s", r.Kind, r.Namespace, r.Name, r.Action)
	}
	return fmt.Sprintf("%s %s %s", r.Kind, r.Name, r.Action)
}

// sameObject reports whether a server-side dry run of an apply left the object as it is. The
// resourceVersion cannot tell: a dry run never writes, so it returns the stored resourceVersion even
// for a change (k8s.io/apiserver pkg/registry/generic/registry/dryrun.go). The objects must be equal
// but for their managed fields, of which only gpuctl's own entry counts (whether gpuctl would own
// other fields): the server may add bookkeeping entries, such as before-first-apply, to an object
// that had none. The status does not count: an apply never writes it (gpuctl's objects have none, and
// a status subresource ignores it), and a controller may write it between the read and the dry run
// (the GPU operator's ClusterPolicy status while it reconciles), which would look like a change.
func sameObject(have, trial *unstructured.Unstructured) bool {
	ours := func(u *unstructured.Unstructured) (fields string) {
		for _, m := range u.GetManagedFields() {
			if m.Manager == FieldManager && m.Operation == metav1.ManagedFieldsOperationApply && m.FieldsV1 != nil {
				fields = string(m.FieldsV1.Raw)
			}
		}
		return fields
	}
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy()
		c.SetManagedFields(nil)
		c.SetResourceVersion("")
		delete(c.Object, "status")
		return c.Object
	}
	return ours(have) == ours(trial) && equality.Semantic.DeepEqual(strip(have), strip(trial))
}

// Apply server-side applies objects gpuctl owns outside Helm (the namespace, platform prerequisites),
// and reports which ones changed: a server-side dry run first tells whether the apply would change
// anything, so a second gpuctl run writes nothing.
type Apply struct {
	Dynamic dynamic.Interface
	Mapper  meta.RESTMapper
	Objects []*unstructured.Unstructured
	DryRun  bool
}

// Run applies the objects in order.
func (a *Apply) Run(ctx context.Context) ([]ObjectResult, error) {
	var out []ObjectResult
	for _, obj := range a.Objects {
		res, err := a.applyOne(ctx, obj)
		if err != nil {
			return out, fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		out = append(out, res)
	}
	return out, nil
}

func (a *Apply) applyOne(ctx context.Context, obj *unstructured.Unstructured) (ObjectResult, error) {
	gvk := obj.GroupVersionKind()
	m, err := a.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return ObjectResult{}, err
	}
	var ri dynamic.ResourceInterface = a.Dynamic.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = a.Dynamic.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	res := ObjectResult{Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	have, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return res, err
	}
	exists := err == nil
	body, err := json.Marshal(obj)
	if err != nil {
		return res, err
	}
	patch := func(dry bool) (*unstructured.Unstructured, error) {
		opts := metav1.PatchOptions{FieldManager: FieldManager, Force: ptr(true)}
		if dry {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		return ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts)
	}
	if exists {
		trial, err := patch(true)
		if err != nil {
			return res, err
		}
		if sameObject(have, trial) {
			res.Action = ObjectUnchanged
			return res, nil
		}
	}
	switch {
	case a.DryRun && exists:
		res.Action = ObjectWouldUpdate
		return res, nil
	case a.DryRun:
		res.Action = ObjectWouldCreate
		return res, nil
	}
	if _, err := patch(false); err != nil {
		return res, err
	}
	res.Action = ObjectCreated
	if exists {
		res.Action = ObjectUpdated
	}
	return res, nil
}
