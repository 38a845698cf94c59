package support

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
)

const ns = "gpu-operator"

func gpuNode(name string, gpu bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	if gpu {
		n.Labels[GPUPresentLabel] = "true"
		n.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	}
	return n
}

// driverPod is a driver DaemonSet pod with an init container whose main container restarted once.
func driverPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nvidia-driver-daemonset-abcde", Namespace: ns, Labels: map[string]string{"app": "nvidia-driver-daemonset"}},
		Spec: corev1.PodSpec{NodeName: "gpu-0",
			InitContainers: []corev1.Container{{Name: "k8s-driver-manager"}},
			Containers:     []corev1.Container{{Name: "nvidia-driver-ctr", Env: []corev1.EnvVar{{Name: "NGC_API_KEY", Value: "legacy-key-in-env"}}}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "nvidia-driver-ctr", RestartCount: 1}}},
	}
}

// collector is a Collector over fakes: kube holds objs, the metadata client a Secret, and logs are
// answered per container (a bearer token in the driver's).
func collector(t *testing.T, objs ...runtime.Object) (*Collector, *fake.Clientset) {
	t.Helper()
	kc := fake.NewClientset(objs...)
	kc.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "log" {
			return false, nil, nil
		}
		opts := a.(k8stesting.GenericAction).GetValue().(*corev1.PodLogOptions)
		line := "container " + opts.Container
		if opts.Previous {
			line += " (previous)"
		}
		if opts.TailLines == nil || *opts.TailLines != DefaultLogLines || opts.LimitBytes == nil || *opts.LimitBytes != DefaultLogBytes {
			t.Errorf("log read unbounded: %+v", opts)
		}
		return true, &runtime.Unknown{Raw: []byte(line + "\nGET /v2/ Authorization: Bearer s3cr3tT0kenValue99\n")}, nil
	})
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	secret := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "ngc-secret", Namespace: ns, Labels: map[string]string{"app": "x"}}}
	mc := metadatafake.NewSimpleMetadataClient(scheme, secret)
	policy := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
		"metadata": map[string]any{"name": "cluster-policy"},
		"spec":     map[string]any{"driver": map[string]any{"env": []any{map[string]any{"name": "NGC_API_KEY", "value": "legacy-key-in-policy"}}}},
		"status":   map[string]any{"state": "notReady"}}}
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{clusterPolicies: "ClusterPolicyList", nvidiaDrivers: "NVIDIADriverList"}, policy)
	dc.PrependReactor("list", "nvidiadrivers", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(nvidiaDrivers.GroupResource(), "")
	})
	return &Collector{Kube: kc, Dynamic: dc, Metadata: mc, Bundle: NewBundle("v", "v", time.Now())}, kc
}

var (
	clusterPolicies = schema.GroupVersionResource{Group: "nvidia.com", Version: "v1", Resource: "clusterpolicies"}
	nvidiaDrivers   = schema.GroupVersionResource{Group: "nvidia.com", Version: "v1alpha1", Resource: "nvidiadrivers"}
)

func files(b *Bundle) map[string]string {
	out := map[string]string{}
	for name, c := range b.files {
		out[name] = string(c)
	}
	return out
}

func TestCollectorGathersANamespaceNodesAndResources(t *testing.T) {
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "nvidia-driver-daemonset", Namespace: ns}}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1", Namespace: ns}, Reason: "BackOff", Message: "Back-off restarting failed container"}
	c, _ := collector(t, nsObj, gpuNode("gpu-0", true), gpuNode("cpu-0", false), driverPod(), ds, ev)
	ctx := context.Background()
	nodes := c.Nodes(ctx)
	pods := c.Namespace(ctx, ns)
	c.Resources(ctx, clusterPolicies, "cluster/clusterpolicies.yaml", "ClusterPolicies")
	c.Resources(ctx, nvidiaDrivers, "cluster/nvidiadrivers.yaml", "NVIDIADrivers")
	got := files(c.Bundle)
	m := c.Bundle.Manifest()

	t.Run("only GPU nodes are collected when any is labelled", func(t *testing.T) {
		if len(nodes) != 1 || !strings.Contains(got["nodes.yaml"], "name: gpu-0") || strings.Contains(got["nodes.yaml"], "cpu-0") {
			t.Errorf("nodes.yaml:\n%s", got["nodes.yaml"])
		}
		if !strings.Contains(got["nodes.yaml"], "nvidia.com/gpu") {
			t.Errorf("taints missing:\n%s", got["nodes.yaml"])
		}
	})
	t.Run("every container's log is read, init containers and previous runs included", func(t *testing.T) {
		if len(pods) != 1 {
			t.Fatalf("pods %d", len(pods))
		}
		dir := "namespaces/gpu-operator/logs/nvidia-driver-daemonset-abcde/"
		for name, want := range map[string]string{"k8s-driver-manager.log": "container k8s-driver-manager", "nvidia-driver-ctr.log": "container nvidia-driver-ctr",
			"nvidia-driver-ctr.previous.log": "(previous)"} {
			if !strings.Contains(got[dir+name], want) {
				t.Errorf("%s = %q", name, got[dir+name])
			}
		}
		if _, ok := got[dir+"k8s-driver-manager.previous.log"]; ok {
			t.Error("a previous log of a container that never restarted")
		}
	})
	t.Run("credentials in logs, env and custom resources are redacted", func(t *testing.T) {
		for name, c := range got {
			for _, s := range []string{"s3cr3tT0kenValue99", "legacy-key-in-env", "legacy-key-in-policy"} {
				if strings.Contains(c, s) {
					t.Errorf("%s holds %s", name, s)
				}
			}
		}
		want := map[string]string{
			"namespaces/gpu-operator/pods.yaml": "spec.containers.env[NGC_API_KEY].value",
			"cluster/clusterpolicies.yaml":      "spec.driver.env[NGC_API_KEY].value",
			"namespaces/gpu-operator/logs/nvidia-driver-daemonset-abcde/k8s-driver-manager.log": "bearer token",
		}
		for file, what := range want {
			found := false
			for _, r := range m.Redactions {
				found = found || (r.File == file && r.What == what)
			}
			if !found {
				t.Errorf("no redaction %q in %s: %+v", what, file, m.Redactions)
			}
		}
	})
	t.Run("Secrets are listed by name, never with data", func(t *testing.T) {
		s := got["namespaces/gpu-operator/secrets.yaml"]
		if !strings.Contains(s, "name: ngc-secret") || strings.Contains(s, "data") {
			t.Errorf("secrets.yaml:\n%s", s)
		}
	})
	t.Run("objects, events and a missing CRD", func(t *testing.T) {
		for _, f := range []string{"namespaces/gpu-operator/daemonsets.yaml", "namespaces/gpu-operator/deployments.yaml"} {
			if _, ok := got[f]; !ok {
				t.Errorf("no %s", f)
			}
		}
		if !strings.Contains(got["namespaces/gpu-operator/events.yaml"], "Back-off restarting") {
			t.Errorf("events.yaml:\n%s", got["namespaces/gpu-operator/events.yaml"])
		}
		if !strings.Contains(got["cluster/clusterpolicies.yaml"], "state: notReady") {
			t.Errorf("clusterpolicies.yaml:\n%s", got["cluster/clusterpolicies.yaml"])
		}
		if _, ok := got["cluster/nvidiadrivers.yaml"]; ok || len(m.Notes) != 1 || !strings.Contains(m.Notes[0], "nvidiadrivers") {
			t.Errorf("notes %v", m.Notes)
		}
		if len(m.Forbidden)+len(m.Errors) != 0 {
			t.Errorf("forbidden %+v, errors %+v", m.Forbidden, m.Errors)
		}
	})
}

func TestCollectorGoesOnWhenReadsFail(t *testing.T) {
	for _, tc := range []struct {
		name      string
		objs      []runtime.Object
		deny      string
		wantFiles []string
		noFiles   []string
		forbidden []string
		notes     int
		nodesWhat string
	}{
		{
			name:      "nodes forbidden: noted, the namespace still read",
			objs:      []runtime.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, gpuNode("gpu-0", true), driverPod()},
			deny:      "nodes",
			wantFiles: []string{"namespaces/gpu-operator/pods.yaml"},
			noFiles:   []string{"nodes.yaml"},
			forbidden: []string{"nodes"},
		},
		{
			name:      "pods forbidden: noted, nodes and the rest still read",
			objs:      []runtime.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, gpuNode("gpu-0", true), driverPod()},
			deny:      "pods",
			wantFiles: []string{"nodes.yaml", "namespaces/gpu-operator/daemonsets.yaml", "namespaces/gpu-operator/events.yaml"},
			noFiles:   []string{"namespaces/gpu-operator/pods.yaml"},
			forbidden: []string{"namespaces/gpu-operator/pods"},
		},
		{
			name:      "no GPU-labelled node: every node is collected",
			objs:      []runtime.Object{gpuNode("cpu-0", false)},
			wantFiles: []string{"nodes.yaml"},
			noFiles:   []string{"namespaces/gpu-operator/pods.yaml"},
			notes:     1,
			nodesWhat: "every node",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, kc := collector(t, tc.objs...)
			if tc.deny != "" {
				kc.PrependReactor("list", tc.deny, func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: tc.deny}, "", errors.New("RBAC"))
				})
			}
			ctx := context.Background()
			c.Nodes(ctx)
			c.Namespace(ctx, ns)
			got, m := files(c.Bundle), c.Bundle.Manifest()
			for _, f := range tc.wantFiles {
				if _, ok := got[f]; !ok {
					t.Errorf("no %s", f)
				}
			}
			for _, f := range tc.noFiles {
				if _, ok := got[f]; ok {
					t.Errorf("%s written", f)
				}
			}
			var forbidden []string
			for _, p := range m.Forbidden {
				forbidden = append(forbidden, p.What)
			}
			if strings.Join(forbidden, ",") != strings.Join(tc.forbidden, ",") {
				t.Errorf("forbidden %v, want %v", forbidden, tc.forbidden)
			}
			if len(m.Notes) != tc.notes {
				t.Errorf("notes %v", m.Notes)
			}
			if tc.nodesWhat != "" {
				for _, f := range m.Files {
					if f.Name == "nodes.yaml" && !strings.HasPrefix(f.What, tc.nodesWhat) {
						t.Errorf("nodes.yaml is %q", f.What)
					}
				}
			}
		})
	}
}
