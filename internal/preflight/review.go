package preflight

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Access is one question for the API server's authorizer: may I do Verb on this resource (or, with
// Path set, on this non-resource URL)? Empty Namespace means cluster-wide; "*" is a wildcard for the
// verb, group and resource.
type Access struct {
	Namespace   string
	Verb        string
	Group       string
	Resource    string
	Subresource string
	Name        string
	Path        string
}

// reviewConcurrency bounds the SelfSubjectAccessReviews in flight: the operator's ClusterRole alone
// expands to a few hundred questions when the caller may not escalate.
const reviewConcurrency = 8

// reviewer asks SelfSubjectAccessReviews and remembers the answers, so each question is asked once.
type reviewer struct {
	kube kubernetes.Interface
	mu   sync.Mutex
	seen map[Access]bool
}

func newReviewer(kube kubernetes.Interface) *reviewer {
	return &reviewer{kube: kube, seen: map[Access]bool{}}
}

// allowed reports the answers for qs, asking those not asked before, at most reviewConcurrency at a
// time. An error is a question the API server could not answer.
func (r *reviewer) allowed(ctx context.Context, qs []Access) (map[Access]bool, error) {
	var todo []Access
	r.mu.Lock()
	pending := map[Access]bool{}
	for _, q := range qs {
		if _, ok := r.seen[q]; !ok && !pending[q] {
			pending[q] = true
			todo = append(todo, q)
		}
	}
	r.mu.Unlock()

	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(reviewConcurrency)
	for _, q := range todo {
		g.Go(func() error {
			ok, err := r.ask(ctx, q)
			if err != nil {
				return err
			}
			r.mu.Lock()
			r.seen[q] = ok
			r.mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make(map[Access]bool, len(qs))
	r.mu.Lock()
	for _, q := range qs {
		out[q] = r.seen[q]
	}
	r.mu.Unlock()
	return out, nil
}

func (r *reviewer) ask(ctx context.Context, q Access) (bool, error) {
	spec := authorizationv1.SelfSubjectAccessReviewSpec{}
	if q.Path != "" {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: q.Path, Verb: q.Verb}
	} else {
		spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Namespace: q.Namespace, Verb: q.Verb, Group: q.Group, Resource: q.Resource, Subresource: q.Subresource, Name: q.Name,
		}
	}
	res, err := r.kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("SelfSubjectAccessReview %s: %w", q, err)
	}
	return res.Status.Allowed, nil
}

// String is the question as a person reads it: "create apps/daemonsets in gpu-operator".
func (q Access) String() string {
	if q.Path != "" {
		return q.Verb + " " + q.Path
	}
	s := q.Verb + " " + q.resource()
	if q.Name != "" {
		s += " " + q.Name
	}
	if q.Namespace != "" {
		s += " in " + q.Namespace
	}
	return s
}

// resource is group/resource[/subresource], with the core group left out.
func (q Access) resource() string {
	r := q.Resource
	if q.Subresource != "" {
		r += "/" + q.Subresource
	}
	if q.Group != "" {
		r = q.Group + "/" + r
	}
	return r
}
