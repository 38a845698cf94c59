package step

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/runner"
)

func TestPSPStep(t *testing.T) {
	run := func(t *testing.T, served bool) (runner.Outcome, []k8stesting.Action, error) {
		t.Helper()
		cs := fake.NewClientset()
		disc := cs.Discovery().(*fakediscovery.FakeDiscovery)
		disc.Resources = []*metav1.APIResourceList{{GroupVersion: "policy/v1", APIResources: []metav1.APIResource{{Name: "poddisruptionbudgets", Kind: "PodDisruptionBudget"}}}}
		if served {
			disc.Resources = append(disc.Resources, &metav1.APIResourceList{GroupVersion: "policy/v1beta1", APIResources: []metav1.APIResource{{Name: "podsecuritypolicies", Kind: "PodSecurityPolicy"}}})
		}
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}: "RoleBindingList"})
		mapper := metaMapper()
		x := &executor{clients: &kube.Clients{Kube: cs, Discovery: disc, Dynamic: dyn, Mapper: mapper}, plan: &plan.Plan{Namespace: "gpu-operator"}}
		out, err := pspKind{}.Do(context.Background(), x, &plan.Step{Target: "gpu-operator"}, nil)
		return out, dyn.Actions(), err
	}
	t.Run("a cluster without PodSecurityPolicy gets no binding", func(t *testing.T) {
		out, actions, err := run(t, false)
		if err != nil || !out.Skipped || len(actions) != 0 {
			t.Errorf("out %+v, err %v, actions %v", out, err, actions)
		}
	})
	t.Run("where PSP is served, the namespace's service accounts get the privileged policy", func(t *testing.T) {
		_, actions, _ := run(t, true)
		var wrote bool
		for _, a := range actions {
			if a.GetResource().Resource == "rolebindings" && a.GetNamespace() == "gpu-operator" && (a.GetVerb() == "patch" || a.GetVerb() == "create") {
				wrote = true
			}
		}
		if !wrote {
			t.Errorf("no RoleBinding written: %v", actions)
		}
	})
}

func metaMapper() *meta.DefaultRESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}, meta.RESTScopeNamespace)
	return m
}
