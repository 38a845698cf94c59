package preflight

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// Permission is one request a verb without install's preflight will make: Verb on Group/Resource, in
// Namespace ("" cluster-wide).
type Permission struct {
	Verb, Group, Resource, Namespace string
}

// Require asks the API server whether the caller may do each of perms, and returns an error wrapping
// ErrFailed (exit 5, "Nothing was changed") that names, on one line, those it may not. what names
// the run ("gpuctl verify") and why it needs them. An API server that cannot answer is no refusal:
// Require returns nil, and the first request the caller may not make fails as it would have.
func Require(ctx context.Context, kube kubernetes.Interface, what string, perms []Permission) error {
	if len(perms) == 0 {
		return nil
	}
	rv := newReviewer(kube)
	// One question settles it for cluster-admin and its equivalents.
	everything := Access{Verb: "*", Group: "*", Resource: "*"}
	if ans, err := rv.allowed(ctx, []Access{everything}); err != nil || ans[everything] {
		return nil
	}
	qs := make([]Access, 0, len(perms))
	for _, p := range perms {
		qs = append(qs, Access{Verb: p.Verb, Group: p.Group, Resource: p.Resource, Namespace: p.Namespace})
	}
	ans, err := rv.allowed(ctx, qs)
	if err != nil {
		return nil
	}
	var missing []string
	for _, q := range qs {
		if !ans[q] && !slices.Contains(missing, q.String()) {
			missing = append(missing, q.String())
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s, and you may not %s (docs/rbac.yaml grants what gpuctl needs)", ErrFailed, what, strings.Join(missing, ", "))
}
