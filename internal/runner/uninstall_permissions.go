package runner

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/render"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// Permissions are the requests that remove the stack, which an uninstall makes after plan p (made by
// Plan): Helm's uninstall of each release (its revision Secrets read, marked and deleted; each object
// of its manifest deleted) and, on OpenShift, its ClusterServiceVersions; each object p deletes, and
// the lists its wait for their dependents makes; the nodes' taints, labels and annotations; with
// --purge, the CRDs. Asked before the first write, they
// keep a caller who may delete only some of them from leaving half a stack. Kinds the API server no
// longer serves are left out: there is nothing of theirs to delete. The record, the lock and the
// purged namespaces are not asked for: they come last, and a rerun finishes them.
func (u *Uninstaller) Permissions(ctx context.Context, p *UninstallPlan) ([]preflight.Permission, error) {
	var perms []preflight.Permission
	seen := map[preflight.Permission]bool{}
	add := func(verb, group, resource, ns string) {
		q := preflight.Permission{Verb: verb, Group: group, Resource: resource, Namespace: ns}
		if !seen[q] {
			seen[q] = true
			perms = append(perms, q)
		}
	}
	addObject := func(gvk schema.GroupVersionKind, ns, releaseNS string) {
		if u.Clients.Mapper == nil {
			return
		}
		m, err := u.Clients.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return
		}
		if m.Scope.Name() != meta.RESTScopeNameNamespace {
			ns = ""
		} else if ns == "" {
			ns = releaseNS
		}
		add("delete", m.Resource.Group, m.Resource.Resource, ns)
	}
	for _, r := range u.rels {
		rc, err := u.releaseClient(r.namespace)
		if err != nil {
			return nil, err
		}
		manifest, err := rc.Manifest(r.name)
		if err != nil {
			return nil, err
		}
		if manifest == "" {
			continue
		}
		for _, verb := range []string{"get", "list", "update", "delete"} {
			add(verb, "", "secrets", r.namespace)
		}
		objs, err := render.DecodeManifest(manifest)
		if err != nil {
			return nil, fmt.Errorf("read release %s's manifest: %w", r.name, err)
		}
		for _, o := range objs {
			if o.GetAnnotations()["helm.sh/resource-policy"] == "keep" {
				continue // Helm's uninstall leaves it
			}
			addObject(o.GroupVersionKind(), o.GetNamespace(), r.namespace)
			if o.GetKind() == "Subscription" && o.GroupVersionKind().Group == kube.CSVsGVR.Group {
				add("delete", kube.CSVsGVR.Group, kube.CSVsGVR.Resource, r.namespace)
			}
		}
	}
	for _, d := range p.Delete {
		gv, err := schema.ParseGroupVersion(d.APIVersion)
		if err != nil {
			continue
		}
		addObject(gv.WithKind(d.Kind), d.Namespace, "")
	}
	if len(p.deletions(stepDeleteCustomResources)) > 0 {
		// Deleting the ClusterPolicy, uninstall waits until what the operator made for it is gone
		// (scanDependents), which it must be able to list.
		namespaced, cluster := dependentResources()
		for _, gvr := range namespaced {
			if u.served(gvr) {
				add("list", gvr.Group, gvr.Resource, u.namespace())
			}
		}
		for _, gvr := range cluster {
			if u.served(gvr) {
				add("list", gvr.Group, gvr.Resource, "")
			}
		}
	}
	tainted, err := (&taint.Untaint{Client: u.Clients.Kube, DryRun: true}).Run(ctx, nil)
	if err != nil {
		return nil, err
	}
	relabel := slices.ContainsFunc(p.Nodes, func(n NodeLabelPlan) bool { return !n.empty() })
	if relabel || tainted.Changed() > 0 {
		add("patch", "", "nodes", "")
	}
	if p.Purge != nil && len(p.Purge.CRDs) > 0 {
		add("delete", "apiextensions.k8s.io", "customresourcedefinitions", "")
	}
	return perms, nil
}
