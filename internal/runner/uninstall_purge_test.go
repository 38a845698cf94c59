package runner

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/record"
)

func TestReleaseFoundNamespaces(t *testing.T) {
	namespace := func(name string, managers ...metav1.ManagedFieldsEntry) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, ManagedFields: managers}}
	}
	entry := func(manager string, op metav1.ManagedFieldsOperationType) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "v1", FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:pod-security.kubernetes.io/enforce":{}}}}`)}}
	}
	applied := entry(kube.FieldManager, metav1.ManagedFieldsOperationApply)
	updated := entry(kube.FieldManager, metav1.ManagedFieldsOperationUpdate)
	others := entry("kubectl-client-side-apply", metav1.ManagedFieldsOperationApply)
	for _, tc := range []struct {
		name     string
		recorded record.Object
		cluster  *corev1.Namespace
		want     []string
	}{
		{"a found namespace gpuctl applied is released", record.Object{Name: "gpu-operator"}, namespace("gpu-operator", others, applied), []string{"gpu-operator"}},
		{"a found namespace gpuctl never applied is left alone", record.Object{Name: "gpu-operator"}, namespace("gpu-operator", others), nil},
		{"gpuctl's updates (not applies) leave nothing to release", record.Object{Name: "gpu-operator"}, namespace("gpu-operator", updated), nil},
		{"a namespace gpuctl created is not released (purge deletes it)", record.Object{Name: "gpu-operator", Created: true}, namespace("gpu-operator", applied), nil},
		{"a found namespace that is gone is skipped", record.Object{Name: "gpu-operator"}, namespace("elsewhere", applied), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := fake.NewClientset(tc.cluster)
			u := &Uninstaller{Clients: &kube.Clients{Kube: kc}, Record: &record.Record{Namespaces: []record.Object{tc.recorded}}}
			got, err := u.releaseFoundNamespaces(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("released %v, want %v", got, tc.want)
			}
			var applies []string
			for _, a := range kc.Actions() {
				if p, ok := a.(k8stesting.PatchAction); ok && p.GetPatchType() == types.ApplyPatchType {
					applies = append(applies, p.GetName())
				}
			}
			if !reflect.DeepEqual(applies, tc.want) {
				t.Errorf("applied %v, want %v", applies, tc.want)
			}
		})
	}
}

// nsItem is an object in namespace gpu-operator as the API server returns it.
func nsItem(apiVersion, kind, name string, uid types.UID, set func(*unstructured.Unstructured)) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name, "namespace": "gpu-operator"}}}
	o.SetUID(uid)
	if set != nil {
		set(o)
	}
	return o
}

// purgeCluster is a cluster after an install by gpuctl: the namespace it created, holding its
// release's objects, what the operator made for its ClusterPolicy, what Kubernetes puts in every
// namespace, and extra (someone else's objects); the CRDs, Secrets and namespace gpuctl created; and
// the record of it all, with UIDs. discovery lists the kinds they are of.
func purgeCluster(extra ...runtime.Object) (*Uninstaller, *dynamicfake.FakeDynamicClient) {
	helm := func(o *unstructured.Unstructured) {
		o.SetAnnotations(map[string]string{"meta.helm.sh/release-name": "gpu-operator", "meta.helm.sh/release-namespace": "gpu-operator"})
	}
	owned := func(uid types.UID) func(*unstructured.Unstructured) {
		return func(o *unstructured.Unstructured) {
			o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Owner", Name: "owner", UID: uid}})
		}
	}
	objs := []runtime.Object{
		nsItem("v1", "ConfigMap", "kube-root-ca.crt", "root-ca", nil),
		nsItem("v1", "ServiceAccount", "default", "sa-default", nil),
		nsItem("v1", "Secret", "ngc-secret", "ngc-1", nil),
		nsItem("v1", "Secret", "sh.helm.release.v1.gpu-operator.v1", "helm-1", func(o *unstructured.Unstructured) {
			o.SetLabels(map[string]string{"owner": "helm", "name": "gpu-operator", "version": "1"})
		}),
		nsItem("apps/v1", "Deployment", "gpu-operator", "dep-1", helm),
		nsItem("apps/v1", "ReplicaSet", "gpu-operator-6c9f", "rs-1", owned("dep-1")),
		nsItem("v1", "Pod", "gpu-operator-6c9f-x2x", "pod-1", owned("rs-1")),
		nsItem("v1", "Service", "gpu-operator", "svc-1", helm),
		nsItem("v1", "Endpoints", "gpu-operator", "ep-1", nil),
		nsItem("discovery.k8s.io/v1", "EndpointSlice", "gpu-operator-abcde", "eps-1", owned("svc-1")),
		// The operator's operands are owned by the ClusterPolicy (cluster-scoped, UID cp-1).
		nsItem("apps/v1", "DaemonSet", "nvidia-device-plugin-daemonset", "ds-1", owned("cp-1")),
		nsItem("v1", "Pod", "nvidia-device-plugin-daemonset-abc", "pod-2", owned("ds-1")),
		nsItem("coordination.k8s.io/v1", "Lease", "53822513.nvidia.com", "lease-1", nil),
		nsItem("coordination.k8s.io/v1", "Lease", "operand-lock", "lease-2", func(o *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(o.Object, "gpu-operator-6c9f-x2x_3f2a", "spec", "holderIdentity")
		}),
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		{Version: "v1", Resource: "configmaps"}:                                "ConfigMapList",
		{Version: "v1", Resource: "secrets"}:                                   "SecretList",
		{Version: "v1", Resource: "serviceaccounts"}:                           "ServiceAccountList",
		{Version: "v1", Resource: "pods"}:                                      "PodList",
		{Version: "v1", Resource: "services"}:                                  "ServiceList",
		{Version: "v1", Resource: "endpoints"}:                                 "EndpointsList",
		{Version: "v1", Resource: "namespaces"}:                                "NamespaceList",
		{Group: "apps", Version: "v1", Resource: "deployments"}:                "DeploymentList",
		{Group: "apps", Version: "v1", Resource: "replicasets"}:                "ReplicaSetList",
		{Group: "apps", Version: "v1", Resource: "daemonsets"}:                 "DaemonSetList",
		{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}: "EndpointSliceList",
		{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}:      "LeaseList",
		{Group: "nvidia.com", Version: "v1alpha1", Resource: "nvidiadrivers"}:  "NVIDIADriverList",
		kube.SubscriptionsGVR:                                                  "SubscriptionList",
	}, append(objs, extra...)...)
	kc := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator", UID: "ns-1"}})
	resource := func(name, kind string, verbs ...string) metav1.APIResource {
		return metav1.APIResource{Name: name, Kind: kind, Namespaced: true, Verbs: append([]string{"list", "delete"}, verbs...)}
	}
	kc.Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{resource("configmaps", "ConfigMap"), resource("secrets", "Secret"),
			resource("serviceaccounts", "ServiceAccount"), resource("pods", "Pod"), resource("pods/log", "Pod"), resource("services", "Service"),
			resource("endpoints", "Endpoints"), resource("events", "Event")}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{resource("deployments", "Deployment"), resource("replicasets", "ReplicaSet"), resource("daemonsets", "DaemonSet")}},
		{GroupVersion: "discovery.k8s.io/v1", APIResources: []metav1.APIResource{resource("endpointslices", "EndpointSlice")}},
		{GroupVersion: "coordination.k8s.io/v1", APIResources: []metav1.APIResource{resource("leases", "Lease")}},
	}
	crd := func(name string, uid types.UID) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "nvidia.com", Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "nvidiadrivers", Kind: "NVIDIADriver"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Storage: true}}}}
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)
	rec := &record.Record{Namespace: "gpu-operator", TracksCustomResources: true,
		Releases:        []record.Object{{Name: "gpu-operator", Namespace: "gpu-operator", Created: true}},
		CustomResources: []record.Object{{APIVersion: "nvidia.com/v1", Kind: "ClusterPolicy", Name: "cluster-policy", UID: "cp-1", Created: true}},
		Namespaces:      []record.Object{{Name: "gpu-operator", UID: "ns-1", Created: true}},
		CRDs: []record.Object{{Name: "nvidiadrivers.nvidia.com", UID: "crd-1", Created: true},
			{Name: "gpuclusters.nvidia.com", UID: "crd-gone", Created: true}},
		Objects: []record.Object{{APIVersion: "v1", Kind: "Secret", Name: "ngc-secret", Namespace: "gpu-operator", UID: "ngc-1", Created: true}},
	}
	ext := apiextensionsfake.NewClientset(crd("nvidiadrivers.nvidia.com", "crd-1"), crd("gpuclusters.nvidia.com", "crd-someone-elses"))
	return &Uninstaller{Clients: &kube.Clients{Kube: kc, Dynamic: dyn, Discovery: kc.Discovery(), Extensions: ext, Mapper: mapper},
		Record: rec, Purge: true, rels: []uninstallRelease{{"gpu-operator", "gpu-operator"}}}, dyn
}

// --purge deletes by the record's UIDs, keeps an object of a recorded name that is not the one gpuctl
// created, and keeps the namespace gpuctl created when it holds anything gpuctl did not create,
// naming what; everything Kubernetes, the release and the operator put there is gpuctl's.
func TestPurgePlanDeletesByUIDAndKeepsWhatIsNotGpuctls(t *testing.T) {
	teamNotes := nsItem("v1", "ConfigMap", "team-notes", "notes-1", nil)
	for _, tc := range []struct {
		name       string
		extra      []runtime.Object
		wantDelete []string
		wantKept   []string
		wantNS     []KeptNamespace
	}{
		{name: "a namespace with nothing but gpuctl's objects goes; a CRD of gpuctl's name someone re-created stays",
			wantDelete: []string{"purge-objects Secret gpu-operator/ngc-secret ngc-1", "purge-crds CustomResourceDefinition nvidiadrivers.nvidia.com crd-1",
				"purge-namespaces Namespace gpu-operator ns-1"},
			wantKept: []string{"CustomResourceDefinition gpuclusters.nvidia.com (not the one gpuctl created (UID differs))"}},
		{name: "a ConfigMap someone created keeps the namespace, named",
			extra:      []runtime.Object{teamNotes},
			wantDelete: []string{"purge-objects Secret gpu-operator/ngc-secret ngc-1", "purge-crds CustomResourceDefinition nvidiadrivers.nvidia.com crd-1"},
			wantKept:   []string{"CustomResourceDefinition gpuclusters.nvidia.com (not the one gpuctl created (UID differs))"},
			wantNS:     []KeptNamespace{{Name: "gpu-operator", Holds: []string{"ConfigMap team-notes"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, _ := purgeCluster(tc.extra...)
			pp, err := u.planPurge(t.Context(), &UninstallPlan{}, u.rels)
			if err != nil {
				t.Fatal(err)
			}
			var deletes, kept []string
			for _, d := range pp.Delete {
				deletes = append(deletes, d.Step+" "+d.String()+" "+string(d.UID))
			}
			for _, k := range pp.Kept {
				kept = append(kept, k.String())
			}
			if !slices.Equal(deletes, tc.wantDelete) {
				t.Errorf("deletes\n%q\nwant\n%q", deletes, tc.wantDelete)
			}
			if !slices.Equal(kept, tc.wantKept) {
				t.Errorf("kept %q, want %q", kept, tc.wantKept)
			}
			if !reflect.DeepEqual(pp.KeptNamespaces, tc.wantNS) {
				t.Errorf("kept namespaces %+v, want %+v", pp.KeptNamespaces, tc.wantNS)
			}
		})
	}
	t.Run("a Secret of gpuctl's name with another UID stays, and keeps the namespace too", func(t *testing.T) {
		u, _ := purgeCluster()
		u.Record.Objects[0].UID = "ngc-gone"
		pp, err := u.planPurge(t.Context(), &UninstallPlan{}, u.rels)
		if err != nil {
			t.Fatal(err)
		}
		if len(pp.deletions(stepPurgeObjects)) != 0 || !slices.ContainsFunc(pp.Kept, func(k KeptObject) bool {
			return k.String() == "Secret gpu-operator/ngc-secret (not the one gpuctl created (UID differs))"
		}) {
			t.Errorf("deletes %+v, kept %+v: want Secret ngc-secret kept", pp.Delete, pp.Kept)
		}
		if want := []KeptNamespace{{Name: "gpu-operator", Holds: []string{"Secret ngc-secret"}}}; !reflect.DeepEqual(pp.KeptNamespaces, want) {
			t.Errorf("kept namespaces %+v, want %+v", pp.KeptNamespaces, want)
		}
	})
	t.Run("a record of an older gpuctl without UIDs deletes by name, and says so", func(t *testing.T) {
		u, _ := purgeCluster()
		for _, l := range [][]record.Object{u.Record.Objects, u.Record.CRDs, u.Record.Namespaces} {
			for i := range l {
				l[i].UID = ""
			}
		}
		pp, err := u.planPurge(t.Context(), &UninstallPlan{}, u.rels)
		if err != nil {
			t.Fatal(err)
		}
		if len(pp.Delete) != 4 || len(pp.Kept) != 0 {
			t.Fatalf("deletes %+v, kept %+v: want the Secret, both CRDs and the namespace by name", pp.Delete, pp.Kept)
		}
		for _, d := range pp.Delete {
			if d.UID == "" || !strings.Contains(d.Why, "without UIDs") {
				t.Errorf("deletion %+v: want the UID seen now and a why that says the record has none", d)
			}
		}
	})
}

func TestAKeptNamespaceNamesTheFirstTenAndCountsTheRest(t *testing.T) {
	var foreign []string
	for i := range 13 {
		foreign = append(foreign, fmt.Sprintf("ConfigMap c%02d", i))
	}
	got := keptNamespace("gpu-operator", foreign).String()
	want := "namespace gpu-operator: it holds ConfigMap c00, ConfigMap c01, ConfigMap c02, ConfigMap c03, ConfigMap c04, ConfigMap c05, " +
		"ConfigMap c06, ConfigMap c07, ConfigMap c08, ConfigMap c09 and 3 more, which gpuctl did not create"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// The run looks again just before it deletes a namespace: one that holds something new is kept,
// with a warning, and the record keeps it for a later purge. Every delete carries the planned UID.
func TestPurgeLooksAgainBeforeItDeletesANamespace(t *testing.T) {
	for _, foreign := range []bool{false, true} {
		t.Run(fmt.Sprintf("something new in it: %v", foreign), func(t *testing.T) {
			u, dyn := purgeCluster()
			pp, err := u.planPurge(t.Context(), &UninstallPlan{}, u.rels)
			if err != nil || len(pp.deletions(stepPurgeNamespaces)) != 1 {
				t.Fatalf("plan %+v: %v; want the namespace deleted", pp, err)
			}
			u.p, u.FinalizerWait = &UninstallPlan{Purge: pp}, time.Millisecond
			// The release's objects go before the namespace step: their owners are gone by then.
			for _, gvr := range []schema.GroupVersionResource{{Group: "apps", Version: "v1", Resource: "deployments"}, {Group: "apps", Version: "v1", Resource: "replicasets"}} {
				for _, name := range []string{"gpu-operator", "gpu-operator-6c9f"} {
					_ = dyn.Resource(gvr).Namespace("gpu-operator").Delete(t.Context(), name, metav1.DeleteOptions{})
				}
			}
			if foreign {
				if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("gpu-operator").
					Create(t.Context(), nsItem("v1", "ConfigMap", "team-notes", "notes-1", nil), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(t.Context(),
				&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "gpu-operator", "uid": "ns-1"}}},
				metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var warnings []string
			u.Sink = event.SinkFunc(func(e event.Event) {
				if e.Type == event.Warning {
					warnings = append(warnings, e.Message)
				}
			})
			dyn.ClearActions()
			out, err := u.purgeNamespaces(t.Context(), func(string) {})
			if err != nil {
				t.Fatal(err)
			}
			var deletes []string
			for _, a := range dyn.Actions() {
				if d, ok := a.(k8stesting.DeleteAction); ok {
					deletes = append(deletes, d.GetResource().Resource+"/"+d.GetName())
					if pre := d.GetDeleteOptions().Preconditions; pre == nil || pre.UID == nil || *pre.UID != "ns-1" {
						t.Errorf("delete %s/%s without the planned UID as precondition: %+v", d.GetResource().Resource, d.GetName(), pre)
					}
				}
			}
			if foreign {
				if len(deletes) > 0 || !reflect.DeepEqual(u.KeptNamespaces(), []KeptNamespace{{Name: "gpu-operator", Holds: []string{"ConfigMap team-notes"}}}) || len(warnings) != 1 ||
					!strings.Contains(warnings[0], "namespace gpu-operator: it holds ConfigMap team-notes, which gpuctl did not create") ||
					!strings.Contains(out.Message, "kept namespace gpu-operator") {
					t.Errorf("deleted %v, kept %v, warned %q, said %q: want the namespace kept, with a warning naming the ConfigMap", deletes, u.keptNamespaces, warnings, out.Message)
				}
				return
			}
			if !slices.Equal(deletes, []string{"namespaces/gpu-operator"}) || len(warnings) > 0 {
				t.Errorf("deleted %v, warned %q: want the namespace deleted (its pods' owners gone, still gpuctl's)", deletes, warnings)
			}
		})
	}
}
