package step

import (
	"reflect"
	"testing"

	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
)

func TestRecordObjectsNameWhatThePlanAppliesOutsideReleases(t *testing.T) {
	p := &plan.Plan{Namespace: "gpu-operator", Steps: []plan.Step{
		{ID: "namespace", Kind: plan.KindObjects, Objects: []map[string]any{{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "gpu-operator"}}}},
		{ID: "prerequisites", Kind: plan.KindObjects, Objects: []map[string]any{{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": map[string]any{"name": "q", "namespace": "gpu-operator"}}}},
		{ID: "skipped", Kind: plan.KindObjects, Skip: "not needed", Objects: []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "gpu-operator"}}}},
		{ID: "licensing", Kind: plan.KindSecrets, Secrets: []plan.SecretSpec{{Name: "licensing-config", Namespace: "gpu-operator"}, {Name: "ngc-secret", Namespace: "gpu-operator"}}},
		{ID: "psp", Kind: plan.KindPSP, Target: "gpu-operator"},
	}}
	want := []record.Object{
		{APIVersion: "v1", Kind: "ResourceQuota", Name: "q", Namespace: "gpu-operator"},
		{APIVersion: "v1", Kind: "Secret", Name: "licensing-config", Namespace: "gpu-operator"},
		{APIVersion: "v1", Kind: "Secret", Name: "ngc-secret", Namespace: "gpu-operator"},
		{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding", Name: plan.PSPBindingName, Namespace: "gpu-operator"},
	}
	got, err := recordedOf(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Objects, want) || !reflect.DeepEqual(got.Namespaces, []string{"gpu-operator"}) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}
