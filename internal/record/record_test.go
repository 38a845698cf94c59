package record

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
		Inputs: Inputs{Files: []plan.Layer{{Source: "my.yaml", Values: map[string]any{"driver": map[string]any{"enabled": false}}}},
			Set: []string{"operator.logging.level=debug"}, Sharing: []string{"time-slicing=2", "gpu-pool=mps=4"}},
		Releases:              []Object{{Name: "gpu-operator", Namespace: "gpu-operator", Created: true}},
		CRDs:                  []Object{{Name: "clusterpolicies.nvidia.com", UID: "c1", Created: true}, {Name: "nodefeatures.nfd.k8s-sigs.io"}},
		Namespaces:            []Object{{Name: "gpu-operator", UID: "n1", Created: true}},
		Objects:               []Object{{APIVersion: "v1", Kind: "Secret", Name: "ngc-secret", Namespace: "gpu-operator", UID: "s1", Created: true}},
		CustomResources:       []Object{{APIVersion: "nvidia.com/v1", Kind: "ClusterPolicy", Name: "cluster-policy", UID: "0b5e", Created: true}},
		TracksCustomResources: true,
		TaintedNodes:          []string{"gpu-1"},
		NodeMetadataBefore:    map[string]NodeMetadata{"gpu-1": {Labels: map[string]string{"nvidia.com/gpu.present": "true"}}},
	}
	s, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, r)
	}
	if _, err := Decode("{not json"); err == nil {
		t.Error("a broken record decodes without an error")
	}
}

func TestMergeObjects(t *testing.T) {
	for _, tc := range []struct {
		name        string
		before, now []Object
		want        []Object
	}{
		{"an object created by an earlier run stays created when found now",
			[]Object{{Name: "a", Created: true}}, []Object{{Name: "a"}}, []Object{{Name: "a", Created: true}}},
		{"an object found by both runs stays found",
			[]Object{{Name: "a"}}, []Object{{Name: "a"}}, []Object{{Name: "a"}}},
		{"objects of either run are kept, sorted",
			[]Object{{Name: "b", Created: true}}, []Object{{Name: "a"}}, []Object{{Name: "a"}, {Name: "b", Created: true}}},
		{"an object an earlier run created keeps that run's UID when this run finds one of its name",
			[]Object{{Name: "a", UID: "gpuctls", Created: true}}, []Object{{Name: "a", UID: "someone-elses"}}, []Object{{Name: "a", UID: "gpuctls", Created: true}}},
		{"an object this run created has this run's UID",
			[]Object{{Name: "a", UID: "gone", Created: true}}, []Object{{Name: "a", UID: "new", Created: true}}, []Object{{Name: "a", UID: "new", Created: true}}},
		{"an object an older gpuctl recorded without a UID takes the one found now",
			[]Object{{Name: "a", Created: true}}, []Object{{Name: "a", UID: "now"}}, []Object{{Name: "a", UID: "now", Created: true}}},
		{"a Secret and a ConfigMap of one name are two objects",
			[]Object{{APIVersion: "v1", Kind: "Secret", Name: "a", Namespace: "ns", Created: true}},
			[]Object{{APIVersion: "v1", Kind: "ConfigMap", Name: "a", Namespace: "ns"}},
			[]Object{{APIVersion: "v1", Kind: "ConfigMap", Name: "a", Namespace: "ns"}, {APIVersion: "v1", Kind: "Secret", Name: "a", Namespace: "ns", Created: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MergeObjects(tc.before, tc.now); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
