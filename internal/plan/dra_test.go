package plan

import (
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/detect"
)

func withKubernetes(version string) func(*detect.Result) {
	return func(r *detect.Result) { r.KubernetesVersion = version }
}

func TestDRAPlan(t *testing.T) {
	p := build(t, detection("kubeadm", withKubernetes("v1.37.0")), Options{DRA: true})
	op := p.Step("release-" + OperatorRelease).Release
	var layer map[string]any
	for _, l := range op.Layers {
		if l.Source == DRASource {
			layer = l.Values
		}
	}
	want := map[string]any{
		"gpuCluster":    map[string]any{"deployCR": true},
		"clusterPolicy": map[string]any{"deployCR": false},
		"devicePlugin":  map[string]any{"enabled": false},
		"driver":        map[string]any{"nvidiaDriverCRD": map[string]any{"enabled": true}},
		"draDriver":     map[string]any{"computeDomains": map[string]any{"enabled": false}},
	}
	if !reflect.DeepEqual(layer, want) {
		t.Errorf("--dra layer %v, want %v", layer, want)
	}
	if at(op.Values, "gpuCluster", "deployCR") != true || at(op.Values, "clusterPolicy", "deployCR") != false {
		t.Errorf("operator values %v do not ask for the GPUCluster instead of the ClusterPolicy", op.Values)
	}
	ids := stepIDs(p)
	for _, id := range []string{"wait-operator", "wait-validators", "wait-resourceslices", "wait-gpucluster"} {
		if p.Step(id) == nil {
			t.Errorf("steps %v: no %s", ids, id)
		}
	}
	for _, id := range []string{"wait-allocatable", "wait-clusterpolicy"} {
		if p.Step(id) != nil {
			t.Errorf("steps %v: a DRA stack has no %s (no device plugin, no ClusterPolicy)", ids, id)
		}
	}
	if s := p.Step("wait-gpucluster"); s != nil && (s.Kind != KindWaitGPUCluster || s.Target != GPUClusterName) {
		t.Errorf("wait-gpucluster = %+v, want kind %s on %s", s, KindWaitGPUCluster, GPUClusterName)
	}
	if !strings.Contains(p.Step("release-"+OperatorRelease).Why, "GPUCluster") {
		t.Errorf("the operator step does not say it deploys the GPUCluster: %q", p.Step("release-"+OperatorRelease).Why)
	}

	plain := build(t, detection("kubeadm", withKubernetes("v1.37.0")), Options{})
	if plain.Step("wait-clusterpolicy") == nil || plain.Step("wait-gpucluster") != nil {
		t.Errorf("without --dra the plan waits on the ClusterPolicy: %v", stepIDs(plain))
	}
}

func TestDRARefusals(t *testing.T) {
	older := maps.Clone(testCharts)
	older[OperatorRelease] = ChartInfo{Name: "gpu-operator", Version: "25.10.1", AppVersion: "v25.10.1"}
	tests := []struct {
		name   string
		det    *detect.Result
		charts map[string]ChartInfo
		opts   Options
		want   string // in the one-line refusal
	}{
		{"Kubernetes 1.33 has no GA DRA", detection("kubeadm", withKubernetes("v1.33.5")), testCharts,
			Options{DRA: true}, "Kubernetes v1.33.5"},
		{"a provider's 1.33 build is still 1.33", detection("kubeadm", withKubernetes("v1.33.4-eks-7e4d1c8")), testCharts,
			Options{DRA: true}, "needs 1.34"},
		{"an unknown server version cannot be judged", detection("kubeadm"), testCharts,
			Options{DRA: true}, "cannot tell"},
		{"v25.10.1 has no GPUCluster", detection("kubeadm", withKubernetes("v1.37.0")), older,
			Options{DRA: true}, "GPU Operator v25.10.1 has no GPUCluster"},
		{"the device plugin asked for with --set", detection("kubeadm", withKubernetes("v1.37.0")), testCharts,
			Options{DRA: true, Set: map[string]any{"devicePlugin": map[string]any{"enabled": true}}}, "devicePlugin.enabled=true"},
		{"the device plugin asked for in a values file", detection("kubeadm", withKubernetes("v1.37.0")), testCharts,
			Options{DRA: true, Files: []Layer{{Source: "mine.yaml", Values: map[string]any{"devicePlugin": map[string]any{"enabled": true}}}}}, "devicePlugin.enabled=true"},
		{"ComputeDomains asked for, whose CRDs gpuctl does not apply", detection("kubeadm", withKubernetes("v1.37.0")), testCharts,
			Options{DRA: true, Set: map[string]any{"draDriver": map[string]any{"computeDomains": map[string]any{"enabled": true}}}}, "draDriver.computeDomains.enabled=true"},
		{"the ClusterPolicy asked for with --set", detection("kubeadm", withKubernetes("v1.37.0")), testCharts,
			Options{DRA: true, Set: map[string]any{"clusterPolicy": map[string]any{"deployCR": true}}}, "clusterPolicy.deployCR=true"},
		{"resource.k8s.io/v1 turned off in the API server", detection("kubeadm", withKubernetes("v1.37.0"), func(r *detect.Result) {
			r.ResourceAPI = &detect.ServedVersions{Versions: []string{"v1beta2"}}
		}), testCharts, Options{DRA: true}, "does not serve resource.k8s.io/v1 (it serves only v1beta2)"},
		{"DRA's API group not served at all", detection("kubeadm", withKubernetes("v1.37.0"), func(r *detect.Result) {
			r.ResourceAPI = &detect.ServedVersions{}
		}), testCharts, Options{DRA: true}, "(it serves not the group at all)"},
		{"GPU sharing through the device plugin", detection("kubeadm", withKubernetes("v1.37.0")), testCharts,
			Options{DRA: true, Sharing: []string{"time-slicing=4"}}, "--sharing"},
		{"GPU sharing for one pool", detection("kubeadm", withKubernetes("v1.37.0")), testCharts,
			Options{DRA: true, Sharing: []string{"gpu-pool=mps=2"}}, "--sharing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(Input{Detection: tt.det, Profile: fakeProfiles, Charts: tt.charts, Options: tt.opts})
			if len(tt.opts.Sharing) > 0 {
				// The same refusal before the lock, from the inputs alone.
				if err := CheckDRAInputs("v26.7.0", nil, tt.opts.Sharing); err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("CheckDRAInputs: %v, want the refusal naming %q", err, tt.want)
				}
			}
			var de *DRAError
			if !errors.As(err, &de) || !errors.Is(err, ErrInput) {
				t.Fatalf("err = %v, want a *DRAError that is ErrInput", err)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "--dra") {
				t.Errorf("refusal %q: want one line starting with --dra and naming %q", msg, tt.want)
			}
		})
	}
}
