package uninstall

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/kube/kubetest"
)

func TestDeletingTheClusterPolicyLeavesItsOperandsToTheGarbageCollector(t *testing.T) {
	listKinds := map[schema.GroupVersionResource]string{
		{Group: "nvidia.com", Version: "v1", Resource: "clusterpolicies"}: "ClusterPolicyList",
		health.NVIDIADriverResource():                                     "NVIDIADriverList",
	}
	namespaced, cluster := dependentResources()
	for _, gvr := range append(namespaced, cluster...) {
		listKinds[gvr] = "List"
	}
	ds := owned("apps/v1", "DaemonSet", "nvidia-device-plugin-daemonset", "ds-1", "cp-1")
	pod := owned("v1", "Pod", "nvidia-device-plugin-daemonset-abcde", "pod-1", "ds-1")
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds,
		kubetest.CustomResource("ClusterPolicy", "cluster-policy", "cp-1", nil), kubetest.CustomResource("NVIDIADriver", "default", "drv-1", nil), ds, pod)
	u := newExecution(&Executor{Clients: &kube.Clients{Dynamic: dyn}, FinalizerWait: time.Second}, &Plan{namespace: "gpu-operator"})

	deleted, err := u.deleteObjects(t.Context(), []PlannedDeletion{
		{APIVersion: "nvidia.com/v1", Kind: "ClusterPolicy", Name: "cluster-policy", UID: "cp-1"},
		{APIVersion: "nvidia.com/v1alpha1", Kind: "NVIDIADriver", Name: "default", UID: "drv-1"},
	}, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ClusterPolicy cluster-policy", "NVIDIADriver default"}; !slices.Equal(deleted, want) {
		t.Errorf("deleted %v, want %v", deleted, want)
	}
	// NVIDIA's controller re-creates the operands of a ClusterPolicy that is being deleted, so it goes
	// at once; the NVIDIADriver controller handles its own deletion, so it waits for its dependents.
	propagation := map[string]metav1.DeletionPropagation{}
	for _, a := range dyn.Actions() {
		if d, ok := a.(clienttesting.DeleteActionImpl); ok && d.DeleteOptions.PropagationPolicy != nil {
			propagation[d.Name] = *d.DeleteOptions.PropagationPolicy
			if d.DeleteOptions.Preconditions == nil || d.DeleteOptions.Preconditions.UID == nil {
				t.Errorf("%s deleted without its UID as precondition", d.Name)
			}
		}
	}
	if want := map[string]metav1.DeletionPropagation{"cluster-policy": metav1.DeletePropagationBackground,
		"default": metav1.DeletePropagationForeground}; !maps.Equal(propagation, want) {
		t.Errorf("propagation %v, want %v", propagation, want)
	}

	// The collector removes the DaemonSet first, its pod later: the pod is still waited for.
	left, err := u.dependents(t.Context())
	if err != nil || !slices.Equal(left, []string{"DaemonSet gpu-operator/nvidia-device-plugin-daemonset", "Pod gpu-operator/nvidia-device-plugin-daemonset-abcde"}) {
		t.Errorf("before the collector: %v, %v", left, err)
	}
	dsGVR := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}
	if err := dyn.Resource(dsGVR).Namespace("gpu-operator").Delete(t.Context(), ds.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if left, err := u.dependents(t.Context()); err != nil || !slices.Equal(left, []string{"Pod gpu-operator/nvidia-device-plugin-daemonset-abcde"}) {
		t.Errorf("the DaemonSet gone: %v, %v", left, err)
	}
	if _, err := u.waitDependents(t.Context(), func(string) {}); err == nil {
		t.Error("waitDependents returned with the pod still there")
	}
	if err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Namespace("gpu-operator").Delete(t.Context(), pod.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := u.waitDependents(t.Context(), func(string) {}); err != nil || out.Message != "none left" {
		t.Errorf("all gone: %+v, %v", out, err)
	}
}

// The API server answers 403, not 404, to a caller without RBAC on a kind it does not serve: such a
// kind has no dependents to wait for. One it serves and the caller may not list stops the scan.
func TestDependentsOfAKindTheClusterDoesNotServe(t *testing.T) {
	scc := schema.GroupVersionResource{Group: "security.openshift.io", Version: "v1", Resource: "securitycontextconstraints"}
	for _, tc := range []struct {
		name    string
		serves  bool
		wantErr bool
	}{
		{"not served: nothing to wait for", false, false},
		{"served: the caller must be able to list it", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listKinds := map[schema.GroupVersionResource]string{}
			namespaced, cluster := dependentResources()
			mapper := meta.NewDefaultRESTMapper(nil)
			for _, gvr := range append(namespaced, cluster...) {
				listKinds[gvr] = "List"
				if gvr != scc || tc.serves {
					mapper.AddSpecific(gvr.GroupVersion().WithKind(gvr.Resource), gvr, gvr, meta.RESTScopeNamespace)
				}
			}
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds)
			dyn.PrependReactor("list", "securitycontextconstraints", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(scc.GroupResource(), "", errors.New("alice may not list it"))
			})
			u := newExecution(&Executor{Clients: &kube.Clients{Dynamic: dyn, Mapper: mapper}}, &Plan{namespace: "gpu-operator"})
			_, err := u.dependentsOf(t.Context(), "cp-1")
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, want an error: %v", err, tc.wantErr)
			}
		})
	}
}

func TestFinalizerHintNamesTheObjectAndHowToProceed(t *testing.T) {
	hint := (&FinalizerError{Object: "ClusterPolicy cluster-policy", Finalizers: []string{"example.com/hold"}}).Hint()
	for _, want := range []string{"example.com/hold", "kubectl patch clusterpolicy cluster-policy", "gpuctl uninstall again"} {
		if !strings.Contains(hint, want) {
			t.Errorf("hint %q lacks %q", hint, want)
		}
	}
}
