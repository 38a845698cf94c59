package e2e

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/render"
)

func ourClusterPolicyCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds, _, err := render.ChartCRDs("gpu-operator", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		if crd.Name == "clusterpolicies.nvidia.com" {
			return crd
		}
	}
	t.Fatal("no ClusterPolicy CRD in the gpu-operator chart")
	return nil
}

// The classic upgrade failure ("unknown field … ClusterPolicy.spec" after an upgrade, because Helm never
// upgrades crds/) cannot happen with gpuctl: it server-side applies its CRDs over an older one someone
// else installed, a repeat changes nothing, and a newer one is never downgraded.
func TestCRDsAreUpgradedNeverDowngraded(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 0}, NoOperator: true})
	ctx := t.Context()
	ext := apiextensionsclient.NewForConfigOrDie(c.Config)
	ours := ourClusterPolicyCRD(t)

	// An old CRD, as an older chart's crds/ left it: without spec.cdi.
	old := ours.DeepCopy()
	delete(old.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties, "cdi")
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, old, metav1.CreateOptions{FieldManager: "helm"}); err != nil {
		t.Fatal(err)
	}
	if err := kube.WaitCRDEstablished(ctx, ext, old.Name); err != nil {
		t.Fatal(err)
	}
	apply := func(version string) kube.CRDResult {
		t.Helper()
		res, err := (&kube.ApplyCRDs{Client: ext, CRDs: []*apiextensionsv1.CustomResourceDefinition{ours}, Version: version}).Run(ctx)
		if err != nil || len(res) != 1 {
			t.Fatalf("apply: %v %v", res, err)
		}
		return res[0]
	}

	t.Run("an older CRD another tool installed is upgraded, taking its fields over", func(t *testing.T) {
		r := apply("v26.7.0")
		if r.Action != kube.CRDUpdated || !strings.Contains(r.Reason, "helm") {
			t.Fatalf("got %+v", r)
		}
	})

	t.Run("a ClusterPolicy using the new field keeps it", func(t *testing.T) {
		apply("v26.7.0") // ours, whether or not the subtest before ran
		dyn := dynamicClient(t, c)
		cp := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": map[string]any{"name": "p"},
			"spec": map[string]any{"operator": map[string]any{}, "daemonsets": map[string]any{}, "driver": map[string]any{}, "toolkit": map[string]any{},
				"devicePlugin": map[string]any{}, "dcgmExporter": map[string]any{}, "dcgm": map[string]any{}, "nodeStatusExporter": map[string]any{},
				"gfd": map[string]any{}, "cdi": map[string]any{"enabled": true}},
		}}
		created, err := dyn.Resource(clusterPolicies).Create(ctx, cp, metav1.CreateOptions{FieldValidation: "Strict"})
		if err != nil {
			t.Fatalf("strict create with spec.cdi: %v", err)
		}
		if v, _, _ := unstructured.NestedBool(created.Object, "spec", "cdi", "enabled"); !v {
			t.Errorf("spec.cdi was pruned: %v", created.Object["spec"])
		}
	})

	t.Run("applying the same CRD again changes nothing", func(t *testing.T) {
		apply("v26.7.0")
		before, _ := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, ours.Name, metav1.GetOptions{})
		if r := apply("v26.7.0"); r.Action != kube.CRDUnchanged {
			t.Fatalf("got %+v", r)
		}
		after, _ := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, ours.Name, metav1.GetOptions{})
		if before.ResourceVersion != after.ResourceVersion {
			t.Errorf("resourceVersion moved %s → %s", before.ResourceVersion, after.ResourceVersion)
		}
	})

	t.Run("a CRD a newer gpuctl applied is kept, not downgraded", func(t *testing.T) {
		apply("v27.0.0")
		r := apply("v26.7.0")
		if r.Action != kube.CRDKept || !strings.Contains(r.Reason, "v27.0.0") {
			t.Fatalf("got %+v", r)
		}
		got, _ := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, ours.Name, metav1.GetOptions{})
		if got.Annotations[kube.CRDVersionAnnotation] != "v27.0.0" {
			t.Errorf("annotation %q", got.Annotations[kube.CRDVersionAnnotation])
		}
	})
}
