package step

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/lock"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/runner"
)

func TestInterrupted(t *testing.T) {
	signalled, stop := context.WithCancel(context.Background())
	stop()
	lost, lose := context.WithCancelCause(context.Background())
	lose(lock.ErrLost)
	late, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-late.Done()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"a signal", signalled, true},
		{"a lost lock is not an interrupt", lost, false},
		{"the deadline is not an interrupt", late, false},
		{"running", context.Background(), false},
	} {
		if got := runner.Interrupted(tc.ctx); got != tc.want {
			t.Errorf("%s: interrupted = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestReadState(t *testing.T) {
	gpuTainted := node("gpu-1", nil, corev1.Taint{Key: plan.TaintKey, Value: plan.TaintValue, Effect: corev1.TaintEffectNoSchedule})
	gpuOtherEffect := node("gpu-2", nil, corev1.Taint{Key: plan.TaintKey, Value: plan.TaintValue, Effect: corev1.TaintEffectNoExecute})
	cpuTainted := node("cpu-1", nil, corev1.Taint{Key: plan.TaintKey, Value: plan.TaintValue, Effect: corev1.TaintEffectNoSchedule})
	taintStep := &plan.Step{Kind: plan.KindTaint, Taint: &plan.Taint{Key: plan.TaintKey, Value: plan.TaintValue, Effect: plan.TaintEffect}}

	cm := func(ns, name string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": ns}}
	}
	role := map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": "gpu-reader"}}
	policy := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": map[string]any{"name": "cluster-policy"}}}

	for _, tc := range []struct {
		name    string
		step    *plan.Step
		nodes   []runtime.Object
		dynamic []runtime.Object
		secrets []map[string]any
		want    string
	}{
		{"the safety check changed nothing", &plan.Step{Kind: plan.KindSafety}, nil, nil, nil, "nothing changed (the check only reads)"},
		{"a wait changed nothing", &plan.Step{Kind: plan.KindWaitNFD}, nil, nil, nil, ""},
		{"the taint counts GPU nodes with its key and effect only",
			taintStep, []runtime.Object{gpuTainted, gpuOtherEffect, cpuTainted}, nil, nil,
			"1/2 GPU nodes tainted nvidia.com/gpu=present:NoSchedule"},
		{"objects name the missing ones, namespaced and cluster-scoped",
			&plan.Step{Kind: plan.KindObjects, Objects: []map[string]any{cm("gpu-operator", "there"), cm("gpu-operator", "gone"), role}},
			nil, []runtime.Object{&unstructured.Unstructured{Object: cm("gpu-operator", "there")}}, nil,
			"1/3 objects exist (missing: ConfigMap gone, ClusterRole gpu-reader)"},
		{"an object of the same name in another namespace is not the one",
			&plan.Step{Kind: plan.KindObjects, Objects: []map[string]any{cm("gpu-operator", "there")}},
			nil, []runtime.Object{&unstructured.Unstructured{Object: cm("default", "there")}}, nil,
			"0/1 objects exist (missing: ConfigMap there)"},
		{"secrets are the ones read before the run, not the step's",
			&plan.Step{Kind: plan.KindSecrets, Objects: []map[string]any{cm("gpu-operator", "ignored")}},
			nil, []runtime.Object{&unstructured.Unstructured{Object: cm("gpu-operator", "there")}}, []map[string]any{cm("gpu-operator", "there")},
			"1/1 objects exist"},
		{"a ClusterPolicy that exists", &plan.Step{Kind: plan.KindClusterPolicy, PolicyName: "cluster-policy"},
			nil, []runtime.Object{policy}, nil, "ClusterPolicy cluster-policy exists"},
		{"a ClusterPolicy not yet created", &plan.Step{Kind: plan.KindClusterPolicy, PolicyName: "other"},
			nil, []runtime.Object{policy}, nil, "ClusterPolicy other does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := meta.NewDefaultRESTMapper(nil)
			m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
			m.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot)
			x := &executor{
				clients: &kube.Clients{Kube: fake.NewClientset(tc.nodes...), Mapper: m,
					Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
						health.ClusterPolicyResource(): "ClusterPolicyList",
					}, tc.dynamic...)},
				gpuNodes: []string{"gpu-1", "gpu-2"},
				secrets:  tc.secrets,
			}
			k, err := For(tc.step.Kind)
			if err != nil {
				t.Fatal(err)
			}
			got, err := k.State(context.Background(), x, tc.step)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("state %q, want %q", got, tc.want)
			}
		})
	}
}

func TestEstablishedCRDs(t *testing.T) {
	crd := func(name string, established apiextensionsv1.ConditionStatus) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: apiextensionsv1.CustomResourceDefinitionStatus{Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
				{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue},
				{Type: apiextensionsv1.Established, Status: established},
			}}}
	}
	for _, tc := range []struct {
		name string
		crds []runtime.Object
		want int
	}{
		{"none created yet", nil, 0},
		{"only established ones count", []runtime.Object{crd("a.nvidia.com", apiextensionsv1.ConditionTrue), crd("b.nvidia.com", apiextensionsv1.ConditionFalse)}, 1},
		{"every one established", []runtime.Object{crd("a.nvidia.com", apiextensionsv1.ConditionTrue), crd("b.nvidia.com", apiextensionsv1.ConditionTrue)}, 2},
		{"a CRD the step does not name does not count", []runtime.Object{crd("other.example.com", apiextensionsv1.ConditionTrue)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := &executor{clients: &kube.Clients{Extensions: apiextensionsfake.NewClientset(tc.crds...)}}
			got, err := x.establishedCRDs(context.Background(), []string{"a.nvidia.com", "b.nvidia.com"})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("%d established, want %d", got, tc.want)
			}
		})
	}
}
