package uninstall

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/gpuctl/gpuctl/internal/kube"
)

// Contents is what a namespace holds: every object of every namespaced kind the API server lists
// (discovery), Events, metrics and Endpoints aside, and the kinds that could not be listed.
type Contents struct {
	Objects []NamespacedObject
	// Unreadable name what could not be listed ("ConfigMap objects (you may not list them)"): the
	// namespace may hold anything there.
	Unreadable []string
}

// NamespacedObject is an object found in a namespace, with its kind.
type NamespacedObject struct {
	Kind   string
	Object unstructured.Unstructured
}

// key is the object as the objects that name it do: "Kind/name".
func (o NamespacedObject) key() string { return o.Kind + "/" + o.Object.GetName() }

// skippedGroups are API groups whose objects a namespace's deletion does not lose: Events (a log of
// what happened, each with a time to live) and metrics (read from the pods, never stored).
var skippedGroups = map[string]bool{"events.k8s.io": true, "metrics.k8s.io": true, "custom.metrics.k8s.io": true, "external.metrics.k8s.io": true}

// listNamespace lists what namespace ns holds: every object of every namespaced kind the API server
// serves that can be listed and deleted. A kind it may not list, or an API group whose discovery
// failed, is named in Unreadable.
func listNamespace(ctx context.Context, clients *kube.Clients, ns string) (*Contents, error) {
	lists, err := discovery.ServerPreferredNamespacedResources(clients.Discovery)
	c := &Contents{}
	if err != nil {
		failed, ok := err.(*discovery.ErrGroupDiscoveryFailed)
		if !ok {
			return nil, fmt.Errorf("list the kinds the API server serves: %w", err)
		}
		for gv := range failed.Groups {
			if !skippedGroups[gv.Group] {
				c.Unreadable = append(c.Unreadable, "objects of "+gv.String()+" (its API did not answer)")
			}
		}
	}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil || skippedGroups[gv.Group] {
			continue
		}
		for _, r := range l.APIResources {
			if !listable(gv, r) {
				continue
			}
			list, err := clients.Dynamic.Resource(gv.WithResource(r.Name)).Namespace(ns).List(ctx, metav1.ListOptions{})
			switch {
			case kube.Absent(err) || apierrors.IsMethodNotSupported(err):
				continue // gone since discovery (a CRD --purge deleted)
			case apierrors.IsForbidden(err):
				c.Unreadable = append(c.Unreadable, r.Kind+" objects (you may not list them)")
				continue
			case err != nil:
				return nil, fmt.Errorf("list %s in namespace %s: %w", r.Name, ns, err)
			}
			for _, o := range list.Items {
				c.Objects = append(c.Objects, NamespacedObject{Kind: r.Kind, Object: o})
			}
		}
	}
	return c, nil
}

// listable says whether the objects of resource r of gv count among a namespace's contents: a
// resource (not a subresource) that can be listed and deleted. Core Events are the events.k8s.io ones
// (one store). Core Endpoints are derived from Services (the endpoints controller writes them; a
// selectorless Service's user writes them next to the Service, which is listed), and listing them
// draws a deprecation warning from Kubernetes 1.33 on.
func listable(gv schema.GroupVersion, r metav1.APIResource) bool {
	if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "delete") {
		return false
	}
	return gv.Group != "" || r.Name != "events" && r.Name != "endpoints"
}
