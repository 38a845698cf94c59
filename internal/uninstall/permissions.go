package uninstall

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/render"
)

// Permissions are the requests that remove the stack, which the run of p (built from s) makes: Helm's
// uninstall of each release (its revision Secrets read, marked and deleted; each object of its
// manifest deleted) and, on OpenShift, its ClusterServiceVersions; each object p deletes, and the
// lists its wait for their dependents makes; the nodes' taints, labels and annotations; with --purge,
// the CRDs. Asked before the first write, they keep a caller who may delete only some of them from
// leaving half a stack. Kinds the API server no longer serves are left out: there is nothing of
// theirs to delete. The record, the lock and the purged namespaces are not asked for: they come
// last, and a rerun finishes them. It is pure: s holds the manifests and the kinds served.
func Permissions(s *Snapshot, p *Plan) ([]preflight.Permission, error) {
	ps := &permissions{seen: map[preflight.Permission]bool{}, mappings: s.Mappings}
	for _, r := range byRole(s.Releases) {
		if err := ps.release(r); err != nil {
			return nil, err
		}
	}
	for _, d := range p.Delete {
		gv, err := schema.ParseGroupVersion(d.APIVersion)
		if err != nil {
			continue
		}
		ps.object(gv.WithKind(d.Kind), d.Namespace, "")
	}
	if len(p.deletions(stepDeleteCustomResources)) > 0 {
		// Deleting the ClusterPolicy, uninstall waits until what the operator made for it is gone
		// (scanDependents), which it must be able to list.
		namespaced, cluster := dependentResources()
		for _, gvr := range namespaced {
			if s.Served[gvr] {
				ps.add("list", gvr.Group, gvr.Resource, s.Namespace)
			}
		}
		for _, gvr := range cluster {
			if s.Served[gvr] {
				ps.add("list", gvr.Group, gvr.Resource, "")
			}
		}
	}
	relabel := slices.ContainsFunc(p.Nodes, func(n NodeLabelPlan) bool { return !n.empty() })
	if relabel || s.Tainted > 0 {
		ps.add("patch", "", "nodes", "")
	}
	if p.Purge != nil && len(p.Purge.CRDs) > 0 {
		ps.add("delete", "apiextensions.k8s.io", "customresourcedefinitions", "")
	}
	return ps.list, nil
}

// permissions collects requests, each once, in the order first asked.
type permissions struct {
	list     []preflight.Permission
	seen     map[preflight.Permission]bool
	mappings map[schema.GroupVersionKind]Mapping
}

// add asks for verb on resource of group in namespace ns ("": cluster-wide).
func (ps *permissions) add(verb, group, resource, ns string) {
	q := preflight.Permission{Verb: verb, Group: group, Resource: resource, Namespace: ns}
	if !ps.seen[q] {
		ps.seen[q] = true
		ps.list = append(ps.list, q)
	}
}

// object asks for the deletion of an object of gvk in namespace ns (releaseNS when a namespaced
// object names none); nothing for a kind the API server does not serve.
func (ps *permissions) object(gvk schema.GroupVersionKind, ns, releaseNS string) {
	m, ok := ps.mappings[gvk]
	if !ok {
		return
	}
	if !m.Namespaced {
		ns = ""
	} else if ns == "" {
		ns = releaseNS
	}
	ps.add("delete", m.Resource.Group, m.Resource.Resource, ns)
}

// release asks for what Helm's uninstall of r does: its revision Secrets read, marked and deleted,
// each object of its manifest deleted (but what Helm keeps), and for an OLM Subscription its CSV.
func (ps *permissions) release(r InstalledRelease) error {
	if r.Manifest == "" {
		return nil
	}
	for _, verb := range []string{"get", "list", "update", "delete"} {
		ps.add(verb, "", "secrets", r.Namespace)
	}
	objs, err := render.DecodeManifest(r.Manifest)
	if err != nil {
		return fmt.Errorf("read release %s's manifest: %w", r.Name, err)
	}
	for _, o := range objs {
		if o.GetAnnotations()["helm.sh/resource-policy"] == "keep" {
			continue // Helm's uninstall leaves it
		}
		ps.object(o.GroupVersionKind(), o.GetNamespace(), r.Namespace)
		if o.GetKind() == "Subscription" && o.GroupVersionKind().Group == kube.CSVsGVR.Group {
			ps.add("delete", kube.CSVsGVR.Group, kube.CSVsGVR.Resource, r.Namespace)
		}
	}
	return nil
}
