package uninstall

import (
	"encoding/json"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
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

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/kube/kubetest"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
)

// stackDynamicClient serves the stack's custom resources (and NFD's NodeFeatures) holding objs.
func stackDynamicClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		{Group: "nvidia.com", Version: "v1", Resource: "clusterpolicies"}: "ClusterPolicyList",
		health.NVIDIADriverResource():                                     "NVIDIADriverList",
		health.GPUClusterResource():                                       "GPUClusterList",
		record.NFDInstancesResource():                                     "NodeFeatureDiscoveryList",
		nodeFeaturesGVR:                                                   "NodeFeatureList",
	}, objs...)
}

// stackObject is a custom resource of the stack's kinds as a Snapshot holds it (see
// kubetest.CustomResource).
func stackObject(kind, name string, uid types.UID, annotations map[string]string, mf ...metav1.ManagedFieldsEntry) StackObject {
	o := kubetest.CustomResource(kind, name, uid, annotations, mf...)
	return StackObject{Ref: record.Object{APIVersion: o.GetAPIVersion(), Kind: kind, Name: name, UID: uid, Created: true}, Object: *o}
}

// helmInSecrets stores releases as Helm does, in Secrets of kc's namespace gpu-operator (their labels
// the releases' own with Helm's), each deployed at revision 1 with labels.
func helmInSecrets(t *testing.T, kc *fake.Clientset, releases map[string]map[string]string) *release.Client {
	t.Helper()
	cfg := action.NewConfiguration()
	cfg.Releases = storage.Init(driver.NewSecrets(kc.CoreV1().Secrets("gpu-operator")))
	for name, labels := range releases {
		if err := cfg.Releases.Create(&releasev1.Release{Name: name, Namespace: "gpu-operator", Version: 1, Labels: labels,
			Info: &releasev1.Info{Status: rcommon.StatusDeployed}, Chart: &chart.Chart{Metadata: &chart.Metadata{Name: name, Version: "1.0.0"}}}); err != nil {
			t.Fatal(err)
		}
	}
	return release.NewWithConfiguration(cfg, "gpu-operator")
}

// olmObject is an OLM object (a Subscription, a ClusterServiceVersion) with status.
func olmObject(gvr schema.GroupVersionResource, kind, ns, name string, uid types.UID, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns}}}
	if status != nil {
		u.Object["status"] = status
	}
	u.SetUID(uid)
	return u
}

// olmDynamicClient serves OLM's Subscriptions and CSVs, and Deployments, holding objs.
func olmDynamicClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		kube.SubscriptionsGVR: "SubscriptionList",
		kube.CSVsGVR:          "ClusterServiceVersionList",
		{Group: "apps", Version: "v1", Resource: "deployments"}: "DeploymentList",
	}, objs...)
}

// owned is a namespaced object of kind in gpu-operator owned by the object of owner.
func owned(apiVersion, kind, name string, uid, owner types.UID) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": "gpu-operator"}}}
	o.SetUID(uid)
	o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "x/v1", Kind: "Owner", Name: "owner", UID: owner}})
	return o
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

// installed are the objects in namespace gpu-operator after an install by gpuctl: its release's
// objects, what the operator made for its ClusterPolicy, what Kubernetes puts in every namespace, and
// the Secret gpuctl created.
func installed() []*unstructured.Unstructured {
	helm := func(o *unstructured.Unstructured) {
		o.SetAnnotations(map[string]string{"meta.helm.sh/release-name": "gpu-operator", "meta.helm.sh/release-namespace": "gpu-operator"})
	}
	ownedBy := func(uid types.UID) func(*unstructured.Unstructured) {
		return func(o *unstructured.Unstructured) {
			o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Owner", Name: "owner", UID: uid}})
		}
	}
	return []*unstructured.Unstructured{
		nsItem("v1", "ConfigMap", "kube-root-ca.crt", "root-ca", nil),
		nsItem("v1", "ServiceAccount", "default", "sa-default", nil),
		nsItem("v1", "Secret", "ngc-secret", "ngc-1", nil),
		nsItem("v1", "Secret", "sh.helm.release.v1.gpu-operator.v1", "helm-1", func(o *unstructured.Unstructured) {
			o.SetLabels(map[string]string{"owner": "helm", "name": "gpu-operator", "version": "1"})
		}),
		nsItem("apps/v1", "Deployment", "gpu-operator", "dep-1", helm),
		nsItem("apps/v1", "ReplicaSet", "gpu-operator-6c9f", "rs-1", ownedBy("dep-1")),
		nsItem("v1", "Pod", "gpu-operator-6c9f-x2x", "pod-1", ownedBy("rs-1")),
		nsItem("v1", "Service", "gpu-operator", "svc-1", helm),
		nsItem("v1", "Endpoints", "gpu-operator", "ep-1", nil),
		nsItem("discovery.k8s.io/v1", "EndpointSlice", "gpu-operator-abcde", "eps-1", ownedBy("svc-1")),
		// The operator's operands are owned by the ClusterPolicy (cluster-scoped, UID cp-1).
		nsItem("apps/v1", "DaemonSet", "nvidia-device-plugin-daemonset", "ds-1", ownedBy("cp-1")),
		nsItem("v1", "Pod", "nvidia-device-plugin-daemonset-abc", "pod-2", ownedBy("ds-1")),
		nsItem("coordination.k8s.io/v1", "Lease", "53822513.nvidia.com", "lease-1", nil),
		nsItem("coordination.k8s.io/v1", "Lease", "operand-lock", "lease-2", func(o *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(o.Object, "gpu-operator-6c9f-x2x_3f2a", "spec", "holderIdentity")
		}),
	}
}

// purgeRecord is the record of an install by gpuctl, with UIDs: the release, the ClusterPolicy, the
// namespace, the CRDs and the Secret gpuctl created.
func purgeRecord() *record.Record {
	return &record.Record{Namespace: "gpu-operator", TracksCustomResources: true,
		Releases:        []record.Object{{Name: "gpu-operator", Namespace: "gpu-operator", Created: true}},
		CustomResources: []record.Object{{APIVersion: "nvidia.com/v1", Kind: "ClusterPolicy", Name: "cluster-policy", UID: "cp-1", Created: true}},
		Namespaces:      []record.Object{{Name: "gpu-operator", UID: "ns-1", Created: true}},
		CRDs: []record.Object{{Name: "nvidiadrivers.nvidia.com", UID: "crd-1", Created: true},
			{Name: "gpuclusters.nvidia.com", UID: "crd-gone", Created: true}},
		Objects: []record.Object{{APIVersion: "v1", Kind: "Secret", Name: "ngc-secret", Namespace: "gpu-operator", UID: "ngc-1", Created: true}},
	}
}

// purgeSnapshot is the cluster purgeCluster fakes, with extra in namespace gpu-operator, as Read
// finds it for --purge by rec (purgeRecord, perhaps changed): the Secret ngc-1, the CRD
// nvidiadrivers.nvidia.com (crd-1, no custom resources), a gpuclusters.nvidia.com someone else made
// (crd-someone-elses), and the namespace (ns-1) with what it holds (Endpoints are not listed).
func purgeSnapshot(rec *record.Record, extra ...*unstructured.Unstructured) *Snapshot {
	c := &Contents{}
	for _, o := range append(installed(), extra...) {
		if o.GetKind() != "Endpoints" {
			c.Objects = append(c.Objects, NamespacedObject{Kind: o.GetKind(), Object: *o})
		}
	}
	found := func(o record.Object, uid types.UID) Found { return Found{Recorded: o, UID: uid} }
	s := &Snapshot{Record: rec, Namespace: "gpu-operator", Releases: []InstalledRelease{{Name: "gpu-operator", Namespace: "gpu-operator"}},
		Purge: &PurgeSnapshot{
			Objects:    []Found{found(rec.Objects[0], "ngc-1")},
			CRDs:       []FoundCRD{{Found: found(rec.CRDs[0], "crd-1"), Kind: "NVIDIADriver"}, {Found: found(rec.CRDs[1], "crd-someone-elses"), Kind: "NVIDIADriver"}},
			Namespaces: []FoundNamespace{{Found: found(rec.Namespaces[0], "ns-1")}},
		}}
	if isRecorded(rec.Namespaces[0], "ns-1") {
		s.Purge.Namespaces[0].Contents = c
	}
	return s
}

// purgeCluster is a cluster after an install by gpuctl (installed, and extra: someone else's objects),
// as fake clients: the namespace gpuctl created holding them, the CRDs and Secret gpuctl created, and
// discovery listing the kinds they are of. purgeRecord records it.
func purgeCluster(extra ...runtime.Object) (*kube.Clients, *dynamicfake.FakeDynamicClient) {
	var objs []runtime.Object
	for _, o := range installed() {
		objs = append(objs, o)
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
	ext := apiextensionsfake.NewClientset(crd("nvidiadrivers.nvidia.com", "crd-1"), crd("gpuclusters.nvidia.com", "crd-someone-elses"))
	return &kube.Clients{Kube: kc, Dynamic: dyn, Discovery: kc.Discovery(), Extensions: ext, Mapper: mapper, Namespace: "gpu-operator"}, dyn
}

// mustJSON is v as JSON.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
