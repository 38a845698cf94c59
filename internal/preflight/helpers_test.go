package preflight

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/driverimage"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// authorizer answers SelfSubjectAccessReviews in tests.
type authorizer func(a Access) bool

// fakeKube is a fake clientset whose SelfSubjectAccessReviews are answered by allow; asked counts them.
func fakeKube(allow authorizer, objs ...runtime.Object) (*fake.Clientset, *atomic.Int64) {
	cs := fake.NewClientset(objs...)
	var asked atomic.Int64
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		asked.Add(1)
		r := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		var a Access
		if ra := r.Spec.ResourceAttributes; ra != nil {
			a = Access{Namespace: ra.Namespace, Verb: ra.Verb, Group: ra.Group, Resource: ra.Resource, Subresource: ra.Subresource, Name: ra.Name}
		} else if na := r.Spec.NonResourceAttributes; na != nil {
			a = Access{Verb: na.Verb, Path: na.Path}
		}
		r.Status.Allowed = allow != nil && allow(a)
		return true, r, nil
	})
	return cs, &asked
}

// allowAll is cluster-admin.
func allowAll(Access) bool { return true }

// allowExcept allows everything but the wildcard question and the listed accesses, written as
// Access.String() ("create apps/daemonsets in gpu-operator").
func allowExcept(denied ...string) authorizer {
	return func(a Access) bool {
		if a.Verb == "*" && a.Resource == "*" {
			return false
		}
		for _, d := range denied {
			if a.String() == d {
				return false
			}
		}
		return true
	}
}

// testMapper knows the built-in kinds the charts render.
func testMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, k := range []struct {
		gvk        schema.GroupVersionKind
		namespaced bool
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, false},
		{schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}, true},
		{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, true},
		{schema.GroupVersionKind{Version: "v1", Kind: "ResourceQuota"}, true},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, true},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}, true},
		{schema.GroupVersionKind{Group: rbacGroup, Version: "v1", Kind: "ClusterRole"}, false},
		{schema.GroupVersionKind{Group: rbacGroup, Version: "v1", Kind: "ClusterRoleBinding"}, false},
		{schema.GroupVersionKind{Group: rbacGroup, Version: "v1", Kind: "Role"}, true},
		{schema.GroupVersionKind{Group: rbacGroup, Version: "v1", Kind: "RoleBinding"}, true},
		{schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, false},
	} {
		scope := meta.RESTScopeRoot
		if k.namespaced {
			scope = meta.RESTScopeNamespace
		}
		m.Add(k.gvk, scope)
	}
	return m
}

func obj(apiVersion, kind, namespace, name string, fields map[string]any) *unstructured.Unstructured {
	o := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}}
	if namespace != "" {
		o["metadata"].(map[string]any)["namespace"] = namespace
	}
	for k, v := range fields {
		o[k] = v
	}
	return &unstructured.Unstructured{Object: o}
}

func gpuToleration() map[string]any {
	return map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
}

func podSpec(tolerations ...any) map[string]any {
	return map[string]any{"template": map[string]any{"spec": map[string]any{"tolerations": tolerations}}}
}

// testPlan is a Plan with the operator release's values, tainting unless noTaint.
func testPlan(opValues map[string]any, noTaint bool) *plan.Plan {
	taint := plan.Step{ID: "taint", Kind: plan.KindTaint}
	if noTaint {
		taint.Skip = "--no-taint"
	}
	return &plan.Plan{Namespace: "gpu-operator", Profile: "kubeadm", Steps: []plan.Step{
		{ID: "namespace", Kind: plan.KindObjects},
		taint,
		{ID: "release-gpu-operator", Kind: plan.KindRelease, Release: &plan.Release{Name: plan.OperatorRelease, Namespace: "gpu-operator", Values: opValues}},
	}}
}

// gpuNode is a detected GPU node in pool.
func gpuNode(name, pool string) detect.GPUNode {
	return detect.GPUNode{Name: name, Pool: pool, Runtime: "containerd://2.1.4"}
}

// testDetection is a kubeadm cluster with one Ubuntu GPU worker and a CPU worker.
func testDetection() *detect.Result {
	return &detect.Result{
		Distribution:      detect.Candidate{Name: "kubeadm"},
		KubernetesVersion: "v1.34.2",
		Nodes:             detect.NodeCounts{Total: 3, ControlPlane: 1, Workers: 2, GPU: 1},
		GPUNodes:          []detect.GPUNode{gpuNode("gpu-1", "worker-gpu")},
		Pools: []detect.Pool{
			{Name: "control-plane", Nodes: []string{"cp-1"}, Count: 1, ControlPlane: true, OS: "ubuntu", Runtimes: []string{"containerd://2.1.4"}},
			{Name: "worker", Nodes: []string{"cpu-1"}, Count: 1, OS: "ubuntu", Runtimes: []string{"containerd://2.1.4"}},
			{Name: "worker-gpu", Nodes: []string{"gpu-1"}, Count: 1, GPUNodes: 1, OS: "ubuntu", Runtimes: []string{"containerd://2.1.4"}},
		},
		Scheduling: detect.Scheduling{ControlPlaneNodes: []string{"cp-1"}, GPUWorkers: []string{"gpu-1"}, OpenWorkers: []string{"cpu-1"}},
	}
}

// testEnv is an Env for the test cluster, with everything allowed.
func testEnv() *Env {
	kube, _ := fakeKube(allowAll)
	// StepNeeds as the taint step asks for them (internal/step, whose tests check each kind's own).
	return &Env{Kube: kube, Detection: testDetection(), Plan: testPlan(nil, false), Bundle: bundle.Default(), Mapper: testMapper(), Namespace: "gpu-operator",
		StepNeeds: []Access{{Verb: "patch", Resource: "nodes"}, {Verb: "list", Group: "apps", Resource: "daemonsets"}}}
}

// run runs one check by ID.
func run(t *testing.T, id string, env *Env) Result {
	t.Helper()
	for _, c := range Checks() {
		if c.ID == id {
			r := c.Run(context.Background(), env)
			if r.Status == "" {
				t.Fatalf("check %s returned no status", id)
			}
			return r
		}
	}
	t.Fatalf("no check %q", id)
	return Result{}
}

// expect asserts a result's status and that its message (and hint, when hint is non-empty) contain
// the given fragments.
func expect(t *testing.T, r Result, status Status, msg string, hint string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("status %s, want %s: %s (hint: %s)", r.Status, status, r.Message, r.Hint)
	}
	if !strings.Contains(r.Message, msg) {
		t.Errorf("message %q lacks %q", r.Message, msg)
	}
	if hint != "" && !strings.Contains(r.Hint, hint) {
		t.Errorf("hint %q lacks %q", r.Hint, hint)
	}
	if (status == StatusFail || status == StatusWarn) && r.Hint == "" {
		t.Errorf("a %s has no hint: %s", status, r.Message)
	}
}

// fakeTags answers Tags from a map of repository to tags; err, when set, is every answer. asked
// records the repositories and how many docker configs came with each.
type fakeTags struct {
	repos map[string][]string
	err   error
	asked []string
}

func (f *fakeTags) Tags(_ context.Context, repo string, configs [][]byte) ([]string, error) {
	f.asked = append(f.asked, fmt.Sprintf("%s (%d logins)", repo, len(configs)))
	if f.err != nil {
		return nil, f.err
	}
	tags, ok := f.repos[repo]
	if !ok {
		return nil, fmt.Errorf("%s: %w", repo, driverimage.ErrNoRepository)
	}
	return tags, nil
}

func nodeOn(name, kernel, osImage, runtime string) detect.GPUNode {
	return detect.GPUNode{Name: name, Kernel: kernel, OSImage: osImage, Runtime: runtime}
}

// clusterPolicy is a rendered ClusterPolicy with the given driver, toolkit and cdi fields.
func clusterPolicy(driver, toolkit, cdi map[string]any) *unstructured.Unstructured {
	spec := map[string]any{"driver": driver, "toolkit": toolkit, "cdi": cdi}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
		"metadata": map[string]any{"name": "cluster-policy"}, "spec": spec}}
}

func precompiledDriver(version string, pullSecrets ...any) map[string]any {
	return map[string]any{"enabled": true, "usePrecompiled": true, "repository": "nvcr.io/nvidia", "image": "driver", "version": version, "imagePullSecrets": pullSecrets}
}

func driversEnv(distro string, nodes []detect.GPUNode, objs ...*unstructured.Unstructured) *Env {
	return &Env{
		Detection: &detect.Result{Distribution: detect.Candidate{Name: distro}, GPUNodes: nodes},
		Plan:      &plan.Plan{},
		Objects:   objs,
		Namespace: "gpu-operator",
	}
}
