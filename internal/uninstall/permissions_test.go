package uninstall

import (
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// The permissions an uninstall asks for are its plan's requests, judged over what Read read: each release's objects (what Helm
// keeps and kinds the cluster no longer serves left out) and revision Secrets, the custom resources
// and their dependents' lists, and the nodes only when a taint or label of gpuctl's is on one.
func TestUninstallPermissions(t *testing.T) {
	const manifest = `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: gpu-operator}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: gpu-operator}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: kept, namespace: gpu-operator, annotations: {helm.sh/resource-policy: keep}}
---
apiVersion: example.com/v1
kind: Gone
metadata: {name: unserved}
`
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, k := range []struct {
		gvk   schema.GroupVersionKind
		scope meta.RESTScope
	}{
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot},
		{schema.GroupVersionKind{Group: "nvidia.com", Version: "v1", Kind: "ClusterPolicy"}, meta.RESTScopeRoot},
	} {
		mapper.Add(k.gvk, k.scope)
	}
	cfg := action.NewConfiguration()
	cfg.Releases = storage.Init(driver.NewMemory())
	if err := cfg.Releases.Create(&releasev1.Release{Name: "gpu-operator", Namespace: "gpu-operator", Version: 1, Manifest: manifest,
		Info: &releasev1.Info{Status: rcommon.StatusDeployed}, Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "gpu-operator", Version: "26.7.0"}}}); err != nil {
		t.Fatal(err)
	}
	p := &Plan{Delete: []PlannedDeletion{{Step: stepDeleteCustomResources, APIVersion: "nvidia.com/v1", Kind: "ClusterPolicy", Name: "cluster-policy"}}}
	tainted := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Annotations: map[string]string{taint.AddedTaintsAnnotation: `[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}]`}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}}}

	for _, tc := range []struct {
		name      string
		nodes     bool
		wantNodes bool
	}{
		{name: "a node carries gpuctl's taint: the nodes are patched", nodes: true, wantNodes: true},
		{name: "no taint or label of gpuctl's: the nodes are not asked for", nodes: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := fake.NewClientset()
			if tc.nodes {
				if _, err := kc.CoreV1().Nodes().Create(t.Context(), tainted, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			// Read takes what Permissions asks from: the release's manifest, the kinds the cluster
			// serves, the taints gpuctl added.
			r := &reader{clients: &kube.Clients{Kube: kc, Dynamic: stackDynamicClient(), Mapper: mapper, Namespace: "gpu-operator"},
				helm: release.ClientsOf(map[string]*release.Client{"gpu-operator": release.NewWithConfiguration(cfg, "gpu-operator")})}
			s, err := r.read(t.Context(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := Permissions(s, p)
			if err != nil {
				t.Fatal(err)
			}
			want := []preflight.Permission{
				{Verb: "get", Resource: "secrets", Namespace: "gpu-operator"},
				{Verb: "list", Resource: "secrets", Namespace: "gpu-operator"},
				{Verb: "update", Resource: "secrets", Namespace: "gpu-operator"},
				{Verb: "delete", Resource: "secrets", Namespace: "gpu-operator"},
				{Verb: "delete", Group: "apps", Resource: "deployments", Namespace: "gpu-operator"},
				{Verb: "delete", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
				{Verb: "delete", Group: "nvidia.com", Resource: "clusterpolicies"},
				// The dependents' wait lists the kinds of dependentResources the cluster serves.
				{Verb: "list", Group: "apps", Resource: "deployments", Namespace: "gpu-operator"},
				{Verb: "list", Group: "apps", Resource: "daemonsets", Namespace: "gpu-operator"},
				{Verb: "list", Resource: "pods", Namespace: "gpu-operator"},
				{Verb: "list", Resource: "configmaps", Namespace: "gpu-operator"},
				{Verb: "list", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
			}
			if tc.wantNodes {
				want = append(want, preflight.Permission{Verb: "patch", Resource: "nodes"})
			}
			sortPerms := func(ps []preflight.Permission) {
				slices.SortFunc(ps, func(a, b preflight.Permission) int {
					return strings.Compare(a.Verb+a.Group+a.Resource+a.Namespace, b.Verb+b.Group+b.Resource+b.Namespace)
				})
			}
			sortPerms(got)
			sortPerms(want)
			if !slices.Equal(got, want) {
				t.Errorf("permissions\n got %v\nwant %v", got, want)
			}
		})
	}
}
