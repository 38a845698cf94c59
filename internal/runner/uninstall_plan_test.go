package runner

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/kube/kubetest"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/record"
)

func stackDynamicClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		{Group: "nvidia.com", Version: "v1", Resource: "clusterpolicies"}: "ClusterPolicyList",
		health.NVIDIADriverResource():                                     "NVIDIADriverList",
		health.GPUClusterResource():                                       "GPUClusterList",
		record.NFDInstancesResource():                                     "NodeFeatureDiscoveryList",
		nodeFeaturesGVR:                                                   "NodeFeatureList",
	}, objs...)
}

func TestUninstallDeletesOnlyTheCustomResourcesGpuctlCreated(t *testing.T) {
	helm := map[string]string{"meta.helm.sh/release-name": "gpu-operator", "meta.helm.sh/release-namespace": "gpu-operator"}
	applied := metav1.ManagedFieldsEntry{Manager: "gpuctl", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:driver":{}}}`)}}
	objs := []runtime.Object{
		kubetest.CustomResource("ClusterPolicy", "cluster-policy", "cp-1", helm),
		kubetest.CustomResource("NVIDIADriver", "default", "drv-1", helm),
		kubetest.CustomResource("NVIDIADriver", "team-a", "drv-2", nil, metav1.ManagedFieldsEntry{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate}),
		kubetest.CustomResource("ClusterPolicy", "applied", "cp-2", nil, applied),
	}
	rels := []uninstallRelease{{"gpu-operator", "gpu-operator"}}
	for _, tc := range []struct {
		name       string
		rec        *record.Record
		wantDelete []string
		wantKept   []string
	}{
		{
			name: "by the record's UIDs: a same-named object someone re-created is another UID and stays",
			rec: &record.Record{TracksCustomResources: true, CustomResources: []record.Object{
				{Kind: "ClusterPolicy", Name: "cluster-policy", UID: "cp-1"}, {Kind: "NVIDIADriver", Name: "default", UID: "drv-old"}}},
			wantDelete: []string{"ClusterPolicy cluster-policy"},
			wantKept:   []string{"NVIDIADriver default (not created by gpuctl)", "NVIDIADriver team-a (not created by gpuctl)", "ClusterPolicy applied (not created by gpuctl)"},
		},
		{
			name:       "a record without UIDs: what gpuctl's release or its field manager made goes, the rest stays",
			rec:        &record.Record{},
			wantDelete: []string{"ClusterPolicy cluster-policy", "ClusterPolicy applied", "NVIDIADriver default"},
			wantKept:   []string{"NVIDIADriver team-a"},
		},
		{
			name:       "no record at all: the same",
			wantDelete: []string{"ClusterPolicy cluster-policy", "ClusterPolicy applied", "NVIDIADriver default"},
			wantKept:   []string{"NVIDIADriver team-a"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &Uninstaller{Clients: &kube.Clients{Dynamic: stackDynamicClient(objs...)}, Record: tc.rec}
			p := &UninstallPlan{}
			if err := u.planCustomResources(t.Context(), p, rels); err != nil {
				t.Fatal(err)
			}
			var deleted, kept []string
			for _, d := range p.Delete {
				deleted = append(deleted, d.String())
				if d.UID == "" || d.Step != stepDeleteCustomResources {
					t.Errorf("deletion %+v: no UID or step", d)
				}
			}
			for _, k := range p.Kept {
				s := k.String()
				if len(tc.wantKept) > 0 && !slices.Contains(tc.wantKept, s) {
					s = describe(k.Kind, k.Namespace, k.Name)
				}
				kept = append(kept, s)
			}
			slices.Sort(deleted)
			slices.Sort(kept)
			want, wantKept := slices.Sorted(slices.Values(tc.wantDelete)), slices.Sorted(slices.Values(tc.wantKept))
			if !slices.Equal(deleted, want) {
				t.Errorf("deleted %v, want %v", deleted, want)
			}
			if !slices.Equal(kept, wantKept) {
				t.Errorf("kept %v, want %v", kept, wantKept)
			}
		})
	}
}

func TestPurgeRefusesCRDsWithCustomResourcesGpuctlDidNotCreate(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "nvidiadrivers.nvidia.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "nvidia.com", Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "nvidiadrivers", Kind: "NVIDIADriver"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Storage: true}}}}
	objs := []runtime.Object{kubetest.CustomResource("NVIDIADriver", "default", "drv-1", nil), kubetest.CustomResource("NVIDIADriver", "team-a", "drv-2", nil)}
	rec := &record.Record{CRDs: []record.Object{{Name: "nvidiadrivers.nvidia.com", Created: true}, {Name: "gone.nvidia.com", Created: true}}}
	planned := &UninstallPlan{Delete: []PlannedDeletion{{Kind: "NVIDIADriver", Name: "default", UID: "drv-1"}}}
	for _, force := range []bool{false, true} {
		u := &Uninstaller{Clients: &kube.Clients{Dynamic: stackDynamicClient(objs...), Extensions: apiextensionsfake.NewClientset(crd)},
			Record: rec, Purge: true, Force: force}
		pp, err := u.planPurge(t.Context(), planned, nil)
		var fe *ForeignResourcesError
		if force {
			if err != nil {
				t.Errorf("--force: %v", err)
			}
		} else if !errors.As(err, &fe) || !errors.Is(err, preflight.ErrFailed) || !reflect.DeepEqual(fe.Objects, []string{"NVIDIADriver team-a"}) {
			t.Errorf("without --force: %v, want a ForeignResourcesError naming NVIDIADriver team-a and nothing gpuctl deletes itself", err)
		}
		if pp == nil || !slices.Equal(pp.CRDs, []string{"nvidiadrivers.nvidia.com"}) || !slices.Equal(pp.Foreign, []string{"NVIDIADriver team-a"}) || pp.Forced != force {
			t.Errorf("force %v: purge plan %+v", force, pp)
		}
	}
}
