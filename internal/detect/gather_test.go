package detect

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpuctl/gpuctl/internal/distro"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	fakediscovery "k8s.io/client-go/discovery/fake"
	fakedynamic "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// helmPayload encodes a release the way Helm's storage driver does: JSON, gzip, base64.
func helmPayload(t *testing.T, chart, version string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"name":  "ignored",
		"chart": map[string]any{"metadata": map[string]any{"name": chart, "version": version, "appVersion": version}, "templates": []any{}},
		"info":  map[string]any{"status": "deployed"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func helmSecret(t *testing.T, ns, release string, revision, status, chart, version string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: "sh.helm.release.v1." + release + ".v" + revision,
			Labels: map[string]string{"owner": "helm", "name": release, "status": status, "version": revision},
		},
		Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": []byte(helmPayload(t, chart, version))},
	}
}

func clusterObjects(t *testing.T) []runtime.Object {
	gpuNode := node("gpu-1", labels("feature.node.kubernetes.io/pci-10de.present", "true"), gpuCapacity(2))
	cpNode := node("cp-1", kubeadmControlPlane())
	replicas := int32(1)
	return []runtime.Object{
		&cpNode, &gpuNode,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config"}},
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-operator", Name: "gpu-operator", Labels: map[string]string{"app": "gpu-operator"},
				Annotations: map[string]string{"meta.helm.sh/release-name": "gpu-operator", "meta.helm.sh/release-namespace": "gpu-operator"}},
			Spec: appsv1.DeploymentSpec{Replicas: &replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "gpu-operator", Image: "nvcr.io/nvidia/gpu-operator:v26.7.0", Command: []string{"gpu-operator"}, Args: []string{"--leader-elect"}}},
			}}},
			Status: appsv1.DeploymentStatus{ReadyReplicas: 1},
		},
		&appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-operator", Name: "nvidia-device-plugin-daemonset",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "nvidia.com/v1", Kind: "ClusterPolicy", Name: "cluster-policy", Controller: ptrTo(true)}}},
			Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				NodeSelector:   map[string]string{"nvidia.com/gpu.deploy.device-plugin": "true"},
				InitContainers: []corev1.Container{{Name: "toolkit-validation", Image: "nvcr.io/nvidia/gpu-operator:v26.7.0"}},
				Containers:     []corev1.Container{{Name: "nvidia-device-plugin", Image: "nvcr.io/nvidia/k8s-device-plugin:v0.20.0", Command: []string{"nvidia-device-plugin"}}},
			}}},
			Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 1, NumberReady: 1},
		},
		&appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-proxy"},
			Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:v1.33.4"}},
			}}},
		},
		helmSecret(t, "gpu-operator", "gpu-operator", "1", "superseded", "gpu-operator", "v26.3.3"),
		helmSecret(t, "gpu-operator", "gpu-operator", "2", "deployed", "gpu-operator", "v26.7.0"),
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "nfd", Name: "sh.helm.release.v1.nfd.v1",
				Labels: map[string]string{"owner": "helm", "name": "nfd", "status": "failed", "version": "1"}},
			Data: map[string]string{"release": helmPayload(t, "node-feature-discovery", "0.19.0")},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "sh.helm.release.v1.broken.v1",
				Labels: map[string]string{"owner": "helm", "name": "broken", "status": "deployed", "version": "1"}},
			Data: map[string][]byte{"release": []byte("not base64!")},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

func customResources() []runtime.Object {
	cp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
		"metadata": map[string]any{"name": "cluster-policy", "creationTimestamp": "2026-08-21T10:00:00Z"},
		"status": map[string]any{"state": "ready", "namespace": "gpu-operator",
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Reconciled", "message": ""}}},
	}}
	sub := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
		"metadata": map[string]any{"namespace": "nvidia-gpu-operator", "name": "gpu-operator-certified"},
		"spec":     map[string]any{"name": "gpu-operator-certified", "channel": "v26.7", "source": "certified-operators"},
		"status":   map[string]any{"installedCSV": "gpu-operator-certified.v26.7.0", "state": "AtLatestKnown"},
	}}
	other := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
		"metadata": map[string]any{"namespace": "openshift-logging", "name": "cluster-logging"},
		"spec":     map[string]any{"name": "cluster-logging"},
	}}
	cv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
		"metadata": map[string]any{"name": "version"},
		"status": map[string]any{"desired": map[string]any{"version": "4.18.10"},
			"history": []any{
				map[string]any{"version": "4.18.10", "state": "Partial"},
				map[string]any{"version": "4.18.9", "state": "Completed"},
			}},
	}}
	return []runtime.Object{cp, sub, other, cv}
}

func dynamicClient(objs ...runtime.Object) *fakedynamic.FakeDynamicClient {
	return fakedynamic.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		clusterPolicyGVR():  "ClusterPolicyList",
		gpuClusterGVR():     "GPUClusterList",
		subscriptionGVR():   "SubscriptionList",
		clusterVersionGVR(): "ClusterVersionList",
	}, objs...)
}

func discoveryWith(kube *fake.Clientset, version string, groupVersions ...string) *fakediscovery.FakeDiscovery {
	d := kube.Discovery().(*fakediscovery.FakeDiscovery)
	d.FakedServerVersion = serverVersion(version)
	d.Resources = []*metav1.APIResourceList{{GroupVersion: "v1"}, {GroupVersion: "apps/v1"}}
	for _, gv := range groupVersions {
		d.Resources = append(d.Resources, &metav1.APIResourceList{GroupVersion: gv})
	}
	return d
}

func TestGather(t *testing.T) {
	ctx := context.Background()

	t.Run("reads every kind once and keeps only what detection needs", func(t *testing.T) {
		kube := fake.NewClientset(clusterObjects(t)...)
		disc := discoveryWith(kube, "v1.33.4", "nvidia.com/v1", "nvidia.com/v1alpha1", "operators.coreos.com/v1alpha1", "config.openshift.io/v1")
		s, err := Gather(ctx, Clients{Kube: kube, Discovery: disc, Dynamic: dynamicClient(customResources()...)})
		if err != nil {
			t.Fatalf("Gather: %v", err)
		}

		if len(s.Nodes) != 2 || !s.KubeadmConfig || s.ServerVersion.GitVersion != "v1.33.4" {
			t.Errorf("nodes=%d kubeadm=%v version=%v", len(s.Nodes), s.KubeadmConfig, s.ServerVersion)
		}
		if want := []string{"apps", "config.openshift.io", "nvidia.com", "operators.coreos.com"}; !reflect.DeepEqual(s.APIGroups, want) {
			t.Errorf("APIGroups = %v, want %v", s.APIGroups, want)
		}

		var names []string
		for _, w := range s.Workloads {
			names = append(names, w.Kind+"/"+w.Namespace+"/"+w.Name)
		}
		if want := []string{"DaemonSet/gpu-operator/nvidia-device-plugin-daemonset", "Deployment/gpu-operator/gpu-operator"}; !reflect.DeepEqual(names, want) {
			t.Errorf("workloads = %v, want %v (kube-proxy dropped)", names, want)
		}
		for _, w := range s.Workloads {
			switch w.Name {
			case "gpu-operator":
				if w.HelmRelease != "gpu-operator" || w.Desired != 1 || w.Ready != 1 || !reflect.DeepEqual(w.Commands, []string{"gpu-operator --leader-elect"}) {
					t.Errorf("operator workload = %+v", w)
				}
			case "nvidia-device-plugin-daemonset":
				if w.Owner != "ClusterPolicy/cluster-policy" || len(w.Images) != 2 || w.NodeSelector["nvidia.com/gpu.deploy.device-plugin"] != "true" {
					t.Errorf("device plugin workload = %+v", w)
				}
			}
		}

		wantReleases := []HelmRelease{
			{Name: "gpu-operator", Namespace: "gpu-operator", Revision: 2, Status: "deployed", Chart: "gpu-operator", ChartVersion: "v26.7.0", AppVersion: "v26.7.0", Storage: "Secret"},
			{Name: "broken", Namespace: "default", Revision: 1, Status: "deployed", Storage: "Secret"},
			{Name: "nfd", Namespace: "nfd", Revision: 1, Status: "failed", Chart: "node-feature-discovery", ChartVersion: "0.19.0", AppVersion: "0.19.0", Storage: "ConfigMap"},
		}
		for _, want := range wantReleases {
			found := false
			for _, got := range s.HelmReleases {
				if got.Name == want.Name {
					found = true
					if !reflect.DeepEqual(got, want) {
						t.Errorf("release %s = %+v, want %+v", want.Name, got, want)
					}
				}
			}
			if !found {
				t.Errorf("release %s missing from %+v", want.Name, s.HelmReleases)
			}
		}
		if !anyContains(s.Warnings, "default/broken") {
			t.Errorf("warnings = %v, want one for the undecodable release", s.Warnings)
		}

		if len(s.ClusterPolicies) != 1 {
			t.Fatalf("ClusterPolicies = %+v", s.ClusterPolicies)
		}
		cp := s.ClusterPolicies[0]
		if cp.Name != "cluster-policy" || cp.State != "ready" || cp.ReadyReason != "Reconciled" || cp.Namespace != "gpu-operator" || cp.Created.IsZero() {
			t.Errorf("ClusterPolicy = %+v", cp)
		}
		if len(s.Subscriptions) != 1 || s.Subscriptions[0].InstalledCSV != "gpu-operator-certified.v26.7.0" {
			t.Errorf("Subscriptions = %+v, want only the GPU operator's", s.Subscriptions)
		}
		if s.ClusterVersion == nil || s.ClusterVersion.Desired != "4.18.10" || !reflect.DeepEqual(s.ClusterVersion.Completed, []string{"4.18.9"}) {
			t.Errorf("ClusterVersion = %+v", s.ClusterVersion)
		}

		// And the snapshot analyses as expected end to end.
		r := Analyze(s)
		if r.Distribution.Name != distro.OpenShift || r.Distribution.Version != "4.18.9" {
			t.Errorf("distribution = %s %s", r.Distribution.Name, r.Distribution.Version)
		}
		if !r.Existing.GPUOperator.Present || r.Existing.GPUOperator.Helm.Revision != 2 || len(r.GPUNodes) != 1 {
			t.Errorf("existing = %+v, gpu nodes = %+v", r.Existing.GPUOperator, r.GPUNodes)
		}
	})

	t.Run("issues one LIST per kind and no per-node GET", func(t *testing.T) {
		kube := fake.NewClientset(clusterObjects(t)...)
		disc := discoveryWith(kube, "v1.33.4")
		if _, err := Gather(ctx, Clients{Kube: kube, Discovery: disc, Dynamic: dynamicClient()}); err != nil {
			t.Fatal(err)
		}
		counts := map[string]int{}
		for _, a := range kube.Actions() {
			counts[a.GetVerb()+" "+a.GetResource().Resource]++
		}
		for _, k := range []string{"list nodes", "list daemonsets", "list deployments", "list secrets", "list configmaps", "get configmaps"} {
			if counts[k] != 1 {
				t.Errorf("%s: %d calls, want 1 (all calls: %v)", k, counts[k], counts)
			}
		}
		if counts["get nodes"] != 0 {
			t.Errorf("get nodes called %d times", counts["get nodes"])
		}
	})

	t.Run("custom resources of unserved groups are not read", func(t *testing.T) {
		kube := fake.NewClientset(clusterObjects(t)...)
		dyn := dynamicClient(customResources()...)
		s, err := Gather(ctx, Clients{Kube: kube, Discovery: discoveryWith(kube, "v1.33.4"), Dynamic: dyn})
		if err != nil {
			t.Fatal(err)
		}
		if len(dyn.Actions()) != 0 || len(s.ClusterPolicies) != 0 || s.ClusterVersion != nil {
			t.Errorf("dynamic actions = %v, snapshot = %+v", dyn.Actions(), s)
		}
	})

	t.Run("forbidden optional reads become warnings", func(t *testing.T) {
		kube := fake.NewClientset(clusterObjects(t)...)
		forbid := func(resource string) {
			kube.PrependReactor("*", resource, func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New("RBAC: access denied"))
			})
		}
		forbid("secrets")
		forbid("configmaps")
		forbid("daemonsets")
		dyn := dynamicClient()
		dyn.PrependReactor("list", "clusterpolicies", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "nvidia.com", Resource: "clusterpolicies"}, "", errors.New("RBAC"))
		})
		s, err := Gather(ctx, Clients{Kube: kube, Discovery: discoveryWith(kube, "v1.33.4", "nvidia.com/v1"), Dynamic: dyn})
		if err != nil {
			t.Fatalf("Gather: %v", err)
		}
		for _, want := range []string{"list Helm release Secrets", "list Helm release ConfigMaps", "kubeadm-config", "list DaemonSets", "list clusterpolicies.nvidia.com"} {
			if !anyContains(s.Warnings, want) {
				t.Errorf("warnings lack %q: %v", want, s.Warnings)
			}
		}
		if len(s.Nodes) != 2 || len(s.Workloads) != 1 {
			t.Errorf("nodes = %d, workloads = %+v; want the nodes and the operator Deployment", len(s.Nodes), s.Workloads)
		}
		// Analyze still ties the operator to its release through the Deployment's annotation.
		if r := Analyze(s); r.Existing.GPUOperator.Helm == nil || r.Existing.GPUOperator.Helm.Name != "gpu-operator" {
			t.Errorf("operator = %+v", r.Existing.GPUOperator)
		}
	})

	t.Run("refused node list fails", func(t *testing.T) {
		kube := fake.NewClientset()
		kube.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("RBAC"))
		})
		_, err := Gather(ctx, Clients{Kube: kube})
		if err == nil || !strings.Contains(err.Error(), "list nodes") || !apierrors.IsForbidden(err) {
			t.Fatalf("err = %v, want a wrapped Forbidden from listing nodes", err)
		}
	})

	t.Run("other errors on optional reads fail", func(t *testing.T) {
		kube := fake.NewClientset()
		kube.PrependReactor("list", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewServiceUnavailable("etcd is down")
		})
		_, err := Gather(ctx, Clients{Kube: kube, Dynamic: dynamicClient()})
		if err == nil || !strings.Contains(err.Error(), "list Deployments") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("the first error ends the reads still waiting, and is the one returned", func(t *testing.T) {
		kube := fake.NewClientset()
		// An API server that stopped answering: the node watch opens and never says a word, so only
		// the context ends the wait for it. (A reactor that blocked would hold the fake clientset's
		// one mutex and stall every other read with it, which a real server does not do.)
		silent := watch.NewFake()
		defer silent.Stop()
		kube.PrependWatchReactor("nodes", func(k8stesting.Action) (bool, watch.Interface, error) {
			return true, silent, nil
		})
		// Should the reflector fall back to a list, that list is empty and fine: the Deployments error
		// must still be the one returned.
		kube.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, &corev1.NodeList{}, nil
		})
		kube.PrependReactor("list", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewServiceUnavailable("etcd is down")
		})
		guarded, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_, err := Gather(guarded, Clients{Kube: kube, Dynamic: dynamicClient()})
		if guarded.Err() != nil {
			t.Fatalf("Gather still waited for the node list a minute after listing Deployments failed: %v", err)
		}
		if err == nil || !strings.Contains(err.Error(), "list Deployments") || errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want the Deployments error", err)
		}
	})

	t.Run("discovery defaults to the clientset's", func(t *testing.T) {
		kube := fake.NewClientset()
		discoveryWith(kube, "v1.33.4-eks-3025e55")
		s, err := Gather(ctx, Clients{Kube: kube})
		if err != nil {
			t.Fatal(err)
		}
		if s.ServerVersion == nil || s.ServerVersion.GitVersion != "v1.33.4-eks-3025e55" {
			t.Errorf("server version = %+v", s.ServerVersion)
		}
	})

	t.Run("no Kubernetes client is an error", func(t *testing.T) {
		if _, err := Gather(ctx, Clients{}); err == nil {
			t.Fatal("Gather without a client succeeded")
		}
	})
}

func anyContains(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
