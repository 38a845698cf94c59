package kube

import (
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
)

// Absent reports whether err says that what was asked for is not there: the object (NotFound), its
// kind (the RESTMapper knows no such kind), or the resource (a server that does not serve it answers
// 404 with "the server could not find the requested resource", which a client may return unwrapped
// from an aggregated or discovery call).
func Absent(err error) bool {
	return err != nil && (apierrors.IsNotFound(err) || meta.IsNoMatchError(err) ||
		strings.Contains(err.Error(), "the server could not find the requested resource"))
}
