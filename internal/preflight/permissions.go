package preflight

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpuctl/gpuctl/internal/plan"
)

// need is a permission the install needs, and why, when the reason is not simply "it writes that
// object".
type need struct {
	Access
	// via names the role whose rules the caller must hold to create or bind it, e.g. "ClusterRole
	// gpu-operator"; empty for the install's own reads and writes.
	via string
}

// maxMissingLines bounds the missing-permission lines in the message; the rest are counted.
const maxMissingLines = 10

// checkPermissions: every write, read and watch the install makes is allowed, and Kubernetes will let
// the caller create the RBAC objects in the charts (RBAC escalation prevention: a role can only be
// created, and bound, by someone who holds its rules or may escalate and bind).
func checkPermissions(ctx context.Context, env *Env) Result {
	if env.Plan == nil && len(env.Objects) == 0 {
		return skip("needs the install plan, which could not be built")
	}
	if env.Kube == nil {
		return skip("no Kubernetes client")
	}
	rv := newReviewer(env.Kube)

	// One question settles it for cluster-admin and its equivalents.
	everything := Access{Verb: "*", Group: "*", Resource: "*"}
	ans, err := rv.allowed(ctx, []Access{everything})
	if err != nil {
		return reviewFailed(err)
	}
	needs := installNeeds(env)
	if ans[everything] {
		return pass(fmt.Sprintf("you may do anything, like cluster-admin; the install needs %d permissions", countDistinct(needs)))
	}

	missing := map[Access]need{}
	if err := addMissing(ctx, rv, needs, missing); err != nil {
		return reviewFailed(err)
	}
	esc, err := escalationNeeds(ctx, env, rv)
	if err != nil {
		return reviewFailed(err)
	}
	if err := addMissing(ctx, rv, esc, missing); err != nil {
		return reviewFailed(err)
	}
	total := countDistinct(append(slices.Clone(needs), esc...))
	if len(missing) == 0 {
		return pass(fmt.Sprintf("all %d permissions the install needs are granted", total))
	}
	return missingResult(missing, total)
}

// addMissing asks the API server about needs and adds those it denies to missing (the first need of
// each permission, which says why it is needed).
func addMissing(ctx context.Context, rv *reviewer, needs []need, missing map[Access]need) error {
	qs := make([]Access, 0, len(needs))
	for _, n := range needs {
		qs = append(qs, n.Access)
	}
	ans, err := rv.allowed(ctx, qs)
	if err != nil {
		return err
	}
	for _, n := range needs {
		if _, dup := missing[n.Access]; !ans[n.Access] && !dup {
			missing[n.Access] = n
		}
	}
	return nil
}

func reviewFailed(err error) Result {
	return warn("could not ask the API server which permissions you have: "+err.Error(),
		"gpuctl goes ahead; if a permission is missing, the install stops at the first write it may not do")
}

func countDistinct(needs []need) int {
	seen := map[Access]bool{}
	for _, n := range needs {
		seen[n.Access] = true
	}
	return len(seen)
}

// installNeeds are the install's own reads and writes: every object it writes (get, create, patch,
// update: Helm and server-side apply use create or patch, Helm upgrades update), what its steps
// read and write beyond those (Env.StepNeeds: Helm's release Secrets, the CRDs, the taint, the
// lists and watches of the waits), and the install record.
func installNeeds(env *Env) []need {
	var out []need
	add := func(ns, group, resource string, verbs ...string) {
		for _, v := range verbs {
			out = append(out, need{Access: Access{Namespace: ns, Verb: v, Group: group, Resource: resource}})
		}
	}
	crds := crdResources(env.Objects)
	for _, obj := range env.Objects {
		gr, namespaced := resourceFor(env.Mapper, crds, obj)
		ns := ""
		if namespaced {
			ns = obj.GetNamespace()
			if ns == "" {
				ns = env.Namespace
			}
		}
		add(ns, gr.Group, gr.Resource, "get", "create", "patch", "update")
	}
	// What an upgrade's Helm deletes: only kinds the cluster serves (there is nothing of another to
	// delete).
	for _, obj := range env.Removed {
		if env.Mapper == nil {
			break
		}
		gvk := obj.GroupVersionKind()
		m, err := env.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			continue
		}
		ns := ""
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if ns = obj.GetNamespace(); ns == "" {
				ns = env.Namespace
			}
		}
		add(ns, m.Resource.Group, m.Resource.Resource, "delete")
	}
	for _, a := range env.StepNeeds {
		out = append(out, need{Access: a})
	}
	// The install record, a ConfigMap next to the lock (record.Namespace/record.Name).
	add("kube-system", "", "configmaps", "get", "create", "update")
	return out
}

// tainting reports whether the Plan taints the GPU nodes.
func tainting(p *plan.Plan) bool {
	if p == nil {
		return false
	}
	for _, s := range p.Steps {
		if s.Kind == plan.KindTaint {
			return s.Skip == ""
		}
	}
	return false
}

// crdResource is what a CRD among the objects says about the kind it defines.
type crdResource struct {
	resource   string
	namespaced bool
}

// crdResources maps the kinds defined by the CRDs among the objects, for custom resources the cluster
// does not serve yet (the ClusterPolicy before its CRD is applied).
func crdResources(objs []*unstructured.Unstructured) map[schema.GroupKind]crdResource {
	out := map[schema.GroupKind]crdResource{}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		plural, _, _ := unstructured.NestedString(o.Object, "spec", "names", "plural")
		scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
		if kind != "" && plural != "" {
			out[schema.GroupKind{Group: group, Kind: kind}] = crdResource{resource: plural, namespaced: scope == "Namespaced"}
		}
	}
	return out
}

// resourceFor maps an object's kind to its resource: through the mapper, else a CRD among the
// objects, else the conventional lower-case plural (namespaced if the object names a namespace).
func resourceFor(mapper meta.RESTMapper, crds map[schema.GroupKind]crdResource, obj *unstructured.Unstructured) (schema.GroupResource, bool) {
	gvk := obj.GroupVersionKind()
	if mapper != nil {
		if m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			return m.Resource.GroupResource(), m.Scope.Name() == meta.RESTScopeNameNamespace
		}
	}
	if c, ok := crds[gvk.GroupKind()]; ok {
		return schema.GroupResource{Group: gvk.Group, Resource: c.resource}, c.namespaced
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return plural.GroupResource(), obj.GetNamespace() != ""
}

// lineKey is one line of the missing permissions: a resource (or URL) in a namespace, and the role
// whose rules the caller must hold to create or bind it; its verbs are listed together.
type lineKey struct {
	group, resource, namespace, via, path string
}

// what names the line's resource as kubectl's users read it.
func (k lineKey) what() string {
	switch {
	case k.path != "":
		return "URL " + k.path
	case k.group != "":
		return k.group + "/" + k.resource
	default:
		return k.resource
	}
}

// groupMissing gathers the missing permissions into lines, sorted by role, resource and namespace,
// with each line's verbs.
func groupMissing(missing map[Access]need) ([]lineKey, map[lineKey][]string) {
	verbs := map[lineKey][]string{}
	var keys []lineKey
	for _, n := range missing {
		k := lineKey{group: n.Group, resource: n.Resource, namespace: n.Namespace, via: n.via, path: n.Path}
		if n.Subresource != "" {
			k.resource += "/" + n.Subresource
		}
		if n.Name != "" {
			k.resource += " " + n.Name
		}
		if _, ok := verbs[k]; !ok {
			keys = append(keys, k)
		}
		verbs[k] = append(verbs[k], n.Verb)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.via != b.via {
			return a.via < b.via
		}
		if a.what() != b.what() {
			return a.what() < b.what()
		}
		return a.namespace < b.namespace
	})
	for _, vs := range verbs {
		sort.Strings(vs)
	}
	return keys, verbs
}

// missingResult fails the check, listing the missing permissions (maxMissingLines lines, then a count)
// and how to grant them.
func missingResult(missing map[Access]need, total int) Result {
	keys, verbs := groupMissing(missing)
	var lines []string
	viaRole := false
	for i, k := range keys {
		viaRole = viaRole || k.via != ""
		if i >= maxMissingLines {
			continue
		}
		line := k.what() + ": " + strings.Join(verbs[k], ", ")
		if k.namespace != "" {
			line += " (namespace " + k.namespace + ")"
		}
		if k.via != "" {
			line += " (to grant them in " + k.via + ")"
		}
		lines = append(lines, line)
	}
	if len(keys) > maxMissingLines {
		lines = append(lines, fmt.Sprintf("and %d more", len(keys)-maxMissingLines))
	}
	msg := fmt.Sprintf("%d of the %d permissions the install needs are missing:\n%s", len(missing), total, strings.Join(lines, "\n"))
	return fail(msg, missingHint(keys, verbs, viaRole))
}

// missingHint says how to grant what is missing: the one rule where one is missing, else a
// cluster-admin binding; and, where a role is to be created or bound, Kubernetes' escalation rule.
func missingHint(keys []lineKey, verbs map[lineKey][]string, viaRole bool) string {
	hint := "bind a ClusterRole that grants them, e.g. cluster-admin: kubectl create clusterrolebinding gpuctl-install --clusterrole=cluster-admin --user=<you>"
	if len(keys) == 1 && keys[0].via == "" && keys[0].path == "" {
		k := keys[0]
		scope := "a ClusterRole and ClusterRoleBinding"
		if k.namespace != "" {
			scope = "a Role and RoleBinding in namespace " + k.namespace
		}
		hint = fmt.Sprintf("grant the rule {apiGroups: [%q], resources: [%s], verbs: [%s]} with %s, or bind cluster-admin",
			k.group, k.resource, strings.Join(verbs[k], ", "), scope)
	}
	if viaRole {
		hint += "; Kubernetes lets you create and bind a role only if you hold its rules, or may escalate and bind on clusterroles and roles (rbac.authorization.k8s.io)"
	}
	return hint
}
