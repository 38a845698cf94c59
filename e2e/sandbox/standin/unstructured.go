package standin

// Helpers for the unstructured objects the stand-ins read and write (OLM's and the NFD Operator's).

import (
	"context"
	"fmt"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// Get returns the object namespace/name from lister, or nil if it does not exist.
func Get(lister cache.GenericLister, namespace, name string) (*unstructured.Unstructured, error) {
	obj, err := lister.ByNamespace(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("%s/%s: unexpected type %T", namespace, name, obj)
	}
	return u, nil
}

// Field is the string at fields in u, or "".
func Field(u map[string]any, fields ...string) string {
	s, _, _ := unstructured.NestedString(u, fields...)
	return s
}

// Timestamp is now as the API writes timestamps (RFC 3339, UTC, seconds).
func Timestamp() string { return time.Now().UTC().Format(time.RFC3339) }

// SetCondition sets the condition of type typ in conds (a status.conditions list), keeping its
// lastTransitionTime while its status does not change.
func SetCondition(conds []any, typ, status, reason, message string) []any {
	now := Timestamp()
	c := map[string]any{"type": typ, "status": status, "lastTransitionTime": now}
	if reason != "" {
		c["reason"] = reason
	}
	if message != "" {
		c["message"] = message
	}
	out := make([]any, 0, len(conds)+1)
	found := false
	for _, old := range conds {
		m, ok := old.(map[string]any)
		if !ok || m["type"] != typ {
			out = append(out, old)
			continue
		}
		found = true
		if m["status"] == status && m["lastTransitionTime"] != nil {
			c["lastTransitionTime"] = m["lastTransitionTime"]
		}
		out = append(out, c)
	}
	if !found {
		out = append(out, c)
	}
	return out
}

// WriteStatus replaces u's status with status through the status subresource unless nothing but the
// timestamp field stamp (if any) would change.
func WriteStatus(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, u *unstructured.Unstructured, status map[string]any, stamp string) error {
	old, _, _ := unstructured.NestedMap(u.Object, "status")
	if stamp != "" {
		if v, ok := old[stamp]; ok {
			status[stamp] = v
		} else {
			delete(status, stamp)
		}
	}
	if apiequality.Semantic.DeepEqual(old, status) {
		return nil
	}
	if stamp != "" {
		status[stamp] = Timestamp()
	}
	updated := u.DeepCopy()
	updated.Object["status"] = status
	if _, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update status of %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// IgnoreExists drops a create's result and its AlreadyExists error: the object is there.
func IgnoreExists[T any](_ T, err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
