package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
)

// TestUpgradeKeepsTheRecordedDRA: upgrade installs with the recorded --dra unless --dra is given.
func TestUpgradeKeepsTheRecordedDRA(t *testing.T) {
	on, off := true, false
	for _, tt := range []struct {
		name     string
		recorded bool
		flag     *bool
		want     bool
	}{
		{"a DRA install stays DRA", true, nil, true},
		{"--dra=false switches back to the ClusterPolicy", true, &off, false},
		{"--dra switches a ClusterPolicy install to DRA", false, &on, true},
		{"a ClusterPolicy install stays one", false, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := &Upgrade{Clients: &kube.Clients{}}
			rec := &record.Record{Namespace: "gpu-operator", Inputs: record.Inputs{DRA: tt.recorded}}
			inst := u.install(rec, "v26.7.0", nil, UpgradeOptions{DRA: tt.flag}, nil)
			if inst.Options.DRA != tt.want {
				t.Errorf("DRA = %v, want %v", inst.Options.DRA, tt.want)
			}
			if got := recordInputs(inst.Options, nil, nil).DRA; got != tt.want {
				t.Errorf("the record keeps DRA = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDRAInputsAreJudgedWithoutTheCluster: what needs no cluster is refused while reading the
// inputs, before the lock's Lease is written.
func TestDRAInputsAreJudgedWithoutTheCluster(t *testing.T) {
	for _, tt := range []struct {
		name string
		o    InstallOptions
		want string
	}{
		{"a release without a GPUCluster", InstallOptions{DRA: true, OperatorVersion: "v25.10.1"}, "has no GPUCluster"},
		{"the device plugin asked for", InstallOptions{DRA: true, Set: []string{"devicePlugin.enabled=true"}}, "devicePlugin.enabled=true"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readInputs(tt.o)
			var de *plan.DRAError
			if !errors.As(err, &de) || !errors.Is(err, plan.ErrInput) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("readInputs = %v, want a DRAError naming %q", err, tt.want)
			}
		})
	}
	if _, err := readInputs(InstallOptions{DRA: true}); err != nil {
		t.Errorf("--dra on the default release: %v", err)
	}
}
