package engine

import (
	"reflect"
	"testing"
	"time"

	"github.com/gpuctl/gpuctl/internal/plan"
)

func TestRecordRoundTrips(t *testing.T) {
	r := &Record{
		GpuctlVersion: "v1.2.3", Command: "install", Updated: time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC), Result: "succeeded",
		Distribution: "gke", Profile: "gke", Namespace: "gpu-operator", OperatorVersion: "v25.10.1",
		Inputs: RecordInputs{Files: []plan.Layer{{Source: "my.yaml", Values: map[string]any{"driver": map[string]any{"enabled": false}}}},
			Set: []string{"operator.logging.level=debug"}},
		Releases:              []RecordedObject{{Name: "gpu-operator", Namespace: "gpu-operator", Created: true}},
		CRDs:                  []RecordedObject{{Name: "clusterpolicies.nvidia.com", Created: true}, {Name: "nodefeatures.nfd.k8s-sigs.io"}},
		Namespaces:            []RecordedObject{{Name: "gpu-operator", Created: true}},
		Objects:               []RecordedObject{{APIVersion: "v1", Kind: "Secret", Name: "ngc-secret", Namespace: "gpu-operator", Created: true}},
		CustomResources:       []RecordedObject{{APIVersion: "nvidia.com/v1", Kind: "ClusterPolicy", Name: "cluster-policy", UID: "0b5e", Created: true}},
		TracksCustomResources: true,
		TaintedNodes:          []string{"gpu-1"},
		NodeMetadataBefore:    map[string]NodeMetadata{"gpu-1": {Labels: map[string]string{"nvidia.com/gpu.present": "true"}}},
	}
	s, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRecord(s)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, r)
	}
	if _, err := DecodeRecord("{not json"); err == nil {
		t.Error("a broken record decodes without an error")
	}
}

func TestMergeObjects(t *testing.T) {
	for _, tc := range []struct {
		name        string
		before, now []RecordedObject
		want        []RecordedObject
	}{
		{"an object created by an earlier run stays created when found now",
			[]RecordedObject{{Name: "a", Created: true}}, []RecordedObject{{Name: "a"}}, []RecordedObject{{Name: "a", Created: true}}},
		{"an object found by both runs stays found",
			[]RecordedObject{{Name: "a"}}, []RecordedObject{{Name: "a"}}, []RecordedObject{{Name: "a"}}},
		{"objects of either run are kept, sorted",
			[]RecordedObject{{Name: "b", Created: true}}, []RecordedObject{{Name: "a"}}, []RecordedObject{{Name: "a"}, {Name: "b", Created: true}}},
		{"a Secret and a ConfigMap of one name are two objects",
			[]RecordedObject{{APIVersion: "v1", Kind: "Secret", Name: "a", Namespace: "ns", Created: true}},
			[]RecordedObject{{APIVersion: "v1", Kind: "ConfigMap", Name: "a", Namespace: "ns"}},
			[]RecordedObject{{APIVersion: "v1", Kind: "ConfigMap", Name: "a", Namespace: "ns"}, {APIVersion: "v1", Kind: "Secret", Name: "a", Namespace: "ns", Created: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mergeObjects(tc.before, tc.now); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRecordObjectsNameWhatThePlanAppliesOutsideReleases(t *testing.T) {
	p := &plan.Plan{Namespace: "gpu-operator", Steps: []plan.Step{
		{ID: "namespace", Kind: plan.KindObjects, Objects: []map[string]any{{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "gpu-operator"}}}},
		{ID: "prerequisites", Kind: plan.KindObjects, Objects: []map[string]any{{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": map[string]any{"name": "q", "namespace": "gpu-operator"}}}},
		{ID: "skipped", Kind: plan.KindObjects, Skip: "not needed", Objects: []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "gpu-operator"}}}},
		{ID: "licensing", Kind: plan.KindSecrets, Secrets: []plan.SecretSpec{{Name: "licensing-config", Namespace: "gpu-operator"}, {Name: "ngc-secret", Namespace: "gpu-operator"}}},
		{ID: "psp", Kind: plan.KindPSP, Target: "gpu-operator"},
	}}
	want := []RecordedObject{
		{APIVersion: "v1", Kind: "ResourceQuota", Name: "q", Namespace: "gpu-operator"},
		{APIVersion: "v1", Kind: "Secret", Name: "licensing-config", Namespace: "gpu-operator"},
		{APIVersion: "v1", Kind: "Secret", Name: "ngc-secret", Namespace: "gpu-operator"},
		{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding", Name: pspBindingName, Namespace: "gpu-operator"},
	}
	if got := recordObjects(p); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}
