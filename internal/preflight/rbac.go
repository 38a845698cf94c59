package preflight

import (
	"context"
	"encoding/json"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const rbacGroup = "rbac.authorization.k8s.io"

// roleRef names a ClusterRole (Namespace "") or a Role.
type roleRef struct {
	Kind, Namespace, Name string
}

func (r roleRef) String() string {
	if r.Namespace != "" {
		return r.Kind + " " + r.Namespace + "/" + r.Name
	}
	return r.Kind + " " + r.Name
}

// resource is the RBAC resource of the role's kind.
func (r roleRef) resource() string {
	if r.Kind == "ClusterRole" {
		return "clusterroles"
	}
	return "roles"
}

// escalationNeeds applies Kubernetes' RBAC escalation prevention to the roles and bindings among the
// objects (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#privilege-escalation-prevention-and-bootstrapping):
// creating a role needs escalate on it or every permission it grants; binding a role needs bind on it
// or every permission it grants. So for each role the install creates, the caller needs escalate (and
// bind, if the install binds it), or else every rule's verbs; for a binding to a role the install does
// not create, bind on that role, or else the role's rules as the cluster has them.
func escalationNeeds(ctx context.Context, env *Env, rv *reviewer) ([]need, error) {
	rb, err := readRBAC(env)
	if err != nil {
		return nil, err
	}
	// First the cheap questions: escalate and bind, one each per role.
	var qs []Access
	for _, r := range rb.order {
		qs = append(qs, r.access("escalate"))
		if rb.bound[r] {
			qs = append(qs, r.access("bind"))
		}
	}
	for _, r := range rb.external {
		qs = append(qs, r.access("bind"))
	}
	ans, err := rv.allowed(ctx, qs)
	if err != nil {
		return nil, err
	}
	var out []need
	for _, r := range rb.order {
		if ans[r.access("escalate")] && (!rb.bound[r] || ans[r.access("bind")]) {
			continue
		}
		out = append(out, ruleNeeds(rb.roles[r], r.Namespace, r.String())...)
	}
	for _, r := range rb.external {
		if ans[r.access("bind")] {
			continue
		}
		rules, err := readRules(ctx, env, r)
		if err != nil {
			// The role cannot be read, so whether its rules are held is unknown: bind is what is missing.
			out = append(out, need{Access: r.access("bind"), via: "the bindings to " + r.String()})
			continue
		}
		out = append(out, ruleNeeds(rules, rb.externalScope[r], "the bindings to "+r.String())...)
	}
	return out, nil
}

// access is the question whether the caller may do verb on the role itself.
func (r roleRef) access(verb string) Access {
	return Access{Namespace: r.Namespace, Verb: verb, Group: rbacGroup, Resource: r.resource(), Name: r.Name}
}

// rbacObjects are the roles and bindings among the objects the install writes.
type rbacObjects struct {
	// roles are the roles gpuctl creates, with their rules, in the order the objects list them.
	roles map[roleRef][]rbacv1.PolicyRule
	order []roleRef
	// bound are the roles of roles that one of the bindings binds.
	bound map[roleRef]bool
	// external are the roles the bindings bind that gpuctl does not create; externalScope is where
	// such a binding grants the role: a RoleBinding grants even a ClusterRole only in its own namespace.
	external      []roleRef
	externalScope map[roleRef]string
}

// readRBAC sorts the RBAC objects among env.Objects into roles and bindings.
func readRBAC(env *Env) (*rbacObjects, error) {
	rb := &rbacObjects{roles: map[roleRef][]rbacv1.PolicyRule{}, bound: map[roleRef]bool{}, externalScope: map[roleRef]string{}}
	for _, o := range env.Objects {
		if o.GroupVersionKind().Group != rbacGroup || (o.GetKind() != "ClusterRole" && o.GetKind() != "Role") {
			continue
		}
		ref := roleRef{Kind: o.GetKind(), Name: o.GetName()}
		if ref.Kind == "Role" {
			ref.Namespace = namespaceOf(o, env.Namespace)
		}
		var rules []rbacv1.PolicyRule
		if raw, ok := o.Object["rules"]; ok {
			if err := convert(raw, &rules); err != nil {
				return nil, err
			}
		}
		if _, seen := rb.roles[ref]; !seen {
			rb.order = append(rb.order, ref)
		}
		rb.roles[ref] = rules
	}
	for _, o := range env.Objects {
		if o.GroupVersionKind().Group == rbacGroup && (o.GetKind() == "ClusterRoleBinding" || o.GetKind() == "RoleBinding") {
			rb.addBinding(o, env.Namespace)
		}
	}
	return rb, nil
}

// addBinding notes the role a binding binds: one of gpuctl's own, or one it must find in the cluster.
func (rb *rbacObjects) addBinding(o *unstructured.Unstructured, namespace string) {
	kind, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind")
	name, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
	ref := roleRef{Kind: kind, Name: name}
	scope := ""
	if o.GetKind() == "RoleBinding" {
		scope = namespaceOf(o, namespace)
		if kind == "Role" {
			ref.Namespace = scope
		}
	}
	if _, ours := rb.roles[ref]; ours {
		rb.bound[ref] = true
		return
	}
	if _, seen := rb.externalScope[ref]; !seen {
		rb.external = append(rb.external, ref)
		rb.externalScope[ref] = scope
	}
}

// ruleNeeds expands rules into one question per verb, resource (and resource name), in namespace
// (empty: cluster-wide).
func ruleNeeds(rules []rbacv1.PolicyRule, namespace, via string) []need {
	var out []need
	for _, rule := range rules {
		for _, v := range rule.Verbs {
			for _, url := range rule.NonResourceURLs {
				out = append(out, need{Access: Access{Verb: v, Path: url}, via: via})
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					resource, sub, _ := strings.Cut(res, "/")
					a := Access{Namespace: namespace, Verb: v, Group: g, Resource: resource, Subresource: sub}
					if len(rule.ResourceNames) == 0 {
						out = append(out, need{Access: a, via: via})
						continue
					}
					for _, n := range rule.ResourceNames {
						a.Name = n
						out = append(out, need{Access: a, via: via})
					}
				}
			}
		}
	}
	return out
}

func readRules(ctx context.Context, env *Env, r roleRef) ([]rbacv1.PolicyRule, error) {
	if r.Kind == "ClusterRole" {
		cr, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, r.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return cr.Rules, nil
	}
	role, err := env.Kube.RbacV1().Roles(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return role.Rules, nil
}

func namespaceOf(o *unstructured.Unstructured, fallback string) string {
	if ns := o.GetNamespace(); ns != "" {
		return ns
	}
	return fallback
}

// convert turns a decoded JSON value into a typed one.
func convert(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
