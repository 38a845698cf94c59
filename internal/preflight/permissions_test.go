package preflight

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// chartObjects are what the charts render, in miniature: a namespace, a namespaced object without a
// namespace (Helm fills the release's), a Deployment, the operator's ClusterRole and binding, a Role
// and binding, the ClusterPolicy CRD and a ClusterPolicy the mapper does not know yet.
func chartObjects() []*unstructured.Unstructured {
	return []*unstructured.Unstructured{
		obj("v1", "Namespace", "", "gpu-operator", nil),
		obj("v1", "ServiceAccount", "", "gpu-operator", nil),
		obj("apps/v1", "Deployment", "gpu-operator", "gpu-operator", map[string]any{"spec": podSpec()}),
		obj(rbacGroup+"/v1", "ClusterRole", "", "gpu-operator", map[string]any{"rules": []any{
			map[string]any{"apiGroups": []any{"nvidia.com"}, "resources": []any{"clusterpolicies", "clusterpolicies/status"}, "verbs": []any{"get", "deletecollection"}},
			map[string]any{"nonResourceURLs": []any{"/metrics"}, "verbs": []any{"get"}},
		}}),
		obj(rbacGroup+"/v1", "ClusterRoleBinding", "", "gpu-operator", map[string]any{
			"roleRef": map[string]any{"apiGroup": rbacGroup, "kind": "ClusterRole", "name": "gpu-operator"}}),
		obj(rbacGroup+"/v1", "Role", "gpu-operator", "gpu-operator", map[string]any{"rules": []any{
			map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "resourceNames": []any{"leader"}, "verbs": []any{"update"}},
		}}),
		obj(rbacGroup+"/v1", "RoleBinding", "gpu-operator", "gpu-operator", map[string]any{
			"roleRef": map[string]any{"apiGroup": rbacGroup, "kind": "Role", "name": "gpu-operator"}}),
		obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "clusterpolicies.nvidia.com", map[string]any{"spec": map[string]any{
			"group": "nvidia.com", "scope": "Cluster", "names": map[string]any{"kind": "ClusterPolicy", "plural": "clusterpolicies"}}}),
		obj("nvidia.com/v1", "ClusterPolicy", "", "cluster-policy", nil),
	}
}

func permissionsEnv(allow authorizer, objs ...runtime.Object) (*Env, func() int64) {
	env := testEnv()
	kube, asked := fakeKube(allow, objs...)
	env.Kube = kube
	env.Objects = chartObjects()
	return env, asked.Load
}

func TestPermissions(t *testing.T) {
	t.Run("cluster-admin passes with a single review", func(t *testing.T) {
		env, asked := permissionsEnv(allowAll)
		r := run(t, "permissions", env)
		expect(t, r, StatusPass, "you may do anything", "")
		if asked() != 1 {
			t.Errorf("%d reviews, want 1", asked())
		}
	})

	t.Run("a caller holding every permission passes", func(t *testing.T) {
		env, _ := permissionsEnv(allowExcept())
		expect(t, run(t, "permissions", env), StatusPass, "permissions the install needs are granted", "")
	})

	tests := []struct {
		name, denied, line, hint string
	}{
		{"a step's own need (the taint's node patches) is checked", "patch nodes", "nodes: patch", `grant the rule {apiGroups: [""], resources: [nodes], verbs: [patch]} with a ClusterRole`},
		{"a namespaced object without a namespace is checked in the install namespace", "create serviceaccounts in gpu-operator",
			"serviceaccounts: create (namespace gpu-operator)", "a Role and RoleBinding in namespace gpu-operator"},
		{"a custom resource is mapped through its CRD among the objects", "create nvidia.com/clusterpolicies",
			"nvidia.com/clusterpolicies: create", `apiGroups: ["nvidia.com"], resources: [clusterpolicies]`},
		{"the CRD step is needed", "create apiextensions.k8s.io/customresourcedefinitions", "apiextensions.k8s.io/customresourcedefinitions: create", ""},
		{"the install record is needed", "update configmaps in kube-system", "configmaps: update (namespace kube-system)", ""},
	}
	for _, tc := range tests {
		t.Run("fails when missing: "+tc.name, func(t *testing.T) {
			env, _ := permissionsEnv(allowExcept(tc.denied))
			r := run(t, "permissions", env)
			expect(t, r, StatusFail, tc.line, tc.hint)
			if !strings.HasPrefix(r.Message, "1 of the ") {
				t.Errorf("message %q", r.Message)
			}
		})
	}

	t.Run("an object the upgrade's Helm deletes needs delete", func(t *testing.T) {
		env, _ := permissionsEnv(allowExcept("delete configmaps in gpu-operator"))
		env.Removed = []*unstructured.Unstructured{obj("v1", "ConfigMap", "gpu-operator", "dropped-by-the-new-chart", nil)}
		expect(t, run(t, "permissions", env), StatusFail, "configmaps: delete (namespace gpu-operator)", "")
	})

	t.Run("a removed object of a kind the cluster no longer serves needs nothing", func(t *testing.T) {
		env, _ := permissionsEnv(allowExcept("delete example.com/gones"))
		env.Removed = []*unstructured.Unstructured{obj("example.com/v1", "Gone", "", "old", nil)}
		expect(t, run(t, "permissions", env), StatusPass, "granted", "")
	})

	t.Run("with escalate and bind, the roles' rules need not be held", func(t *testing.T) {
		env, _ := permissionsEnv(allowExcept("deletecollection nvidia.com/clusterpolicies", "get /metrics"))
		expect(t, run(t, "permissions", env), StatusPass, "granted", "")
	})

	t.Run("without escalate, every rule of the ClusterRole must be held", func(t *testing.T) {
		env, _ := permissionsEnv(allowExcept("escalate "+rbacGroup+"/clusterroles gpu-operator",
			"deletecollection nvidia.com/clusterpolicies", "deletecollection nvidia.com/clusterpolicies/status", "get /metrics"))
		r := run(t, "permissions", env)
		expect(t, r, StatusFail, "nvidia.com/clusterpolicies: deletecollection (to grant them in ClusterRole gpu-operator)", "may escalate and bind")
		for _, want := range []string{"nvidia.com/clusterpolicies/status: deletecollection", "URL /metrics: get"} {
			if !strings.Contains(r.Message, want) {
				t.Errorf("message lacks %q:\n%s", want, r.Message)
			}
		}
	})

	t.Run("with escalate but without bind, a role the install binds must be held", func(t *testing.T) {
		env, _ := permissionsEnv(allowExcept("bind "+rbacGroup+"/roles gpu-operator in gpu-operator", "update configmaps leader in gpu-operator"))
		expect(t, run(t, "permissions", env), StatusFail, "configmaps leader: update (namespace gpu-operator) (to grant them in Role gpu-operator/gpu-operator)", "")
	})

	t.Run("a binding to a role outside the install needs bind, or the role's rules as the cluster has them", func(t *testing.T) {
		view := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "view"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}
		binding := obj(rbacGroup+"/v1", "RoleBinding", "gpu-operator", "view", map[string]any{
			"roleRef": map[string]any{"apiGroup": rbacGroup, "kind": "ClusterRole", "name": "view"}})

		env, _ := permissionsEnv(allowExcept("bind "+rbacGroup+"/clusterroles view"), view)
		env.Objects = append(env.Objects, binding)
		expect(t, run(t, "permissions", env), StatusPass, "granted", "")

		env, _ = permissionsEnv(allowExcept("bind "+rbacGroup+"/clusterroles view", "get pods in gpu-operator"), view)
		env.Objects = append(env.Objects, binding)
		expect(t, run(t, "permissions", env), StatusFail, "pods: get (namespace gpu-operator) (to grant them in the bindings to ClusterRole view)", "")

		env, _ = permissionsEnv(allowExcept("bind " + rbacGroup + "/clusterroles view"))
		env.Objects = append(env.Objects, binding)
		expect(t, run(t, "permissions", env), StatusFail, rbacGroup+"/clusterroles view: bind", "")
	})

	t.Run("many missing permissions are listed compactly", func(t *testing.T) {
		env, _ := permissionsEnv(allowExcept())
		for i := range 15 {
			env.Objects = append(env.Objects, obj("example.com/v1", "Widget", "", fmt.Sprintf("w%d", i), nil))
			env.Objects = append(env.Objects, obj(fmt.Sprintf("g%02d.example.com/v1", i), "Gadget", "", "g", nil))
		}
		env.Kube, _ = fakeKube(func(a Access) bool { return !strings.HasSuffix(a.Group, ".example.com") && a.Resource != "*" })
		r := run(t, "permissions", env)
		expect(t, r, StatusFail, "and 5 more", "cluster-admin")
		if lines := strings.Count(r.Message, "\n"); lines != 11 {
			t.Errorf("%d lines after the first:\n%s", lines, r.Message)
		}
		if !strings.Contains(r.Message, "g00.example.com/gadgets: create, get, patch, update") {
			t.Errorf("verbs are not grouped per resource:\n%s", r.Message)
		}
	})

	t.Run("each question is asked once", func(t *testing.T) {
		env, asked := permissionsEnv(allowExcept())
		run(t, "permissions", env)
		once := asked()
		env, asked = permissionsEnv(allowExcept())
		env.Objects = append(env.Objects, chartObjects()...)
		run(t, "permissions", env)
		if asked() != once {
			t.Errorf("%d reviews with every object twice, %d with each once", asked(), once)
		}
	})

	t.Run("reviews the API server cannot answer are a warning", func(t *testing.T) {
		env, _ := permissionsEnv(allowAll)
		kube, _ := fakeKube(allowAll)
		kube.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("connection refused")
		})
		env.Kube = kube
		expect(t, run(t, "permissions", env), StatusWarn, "connection refused", "")
	})

	t.Run("without a plan there is nothing to check", func(t *testing.T) {
		env := testEnv()
		env.Plan, env.PlanError = nil, errors.New("unsupported")
		expect(t, run(t, "permissions", env), StatusSkip, "needs the install plan", "")
	})
}
