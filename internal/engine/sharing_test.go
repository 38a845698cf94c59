package engine

import (
	"slices"
	"testing"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/record"
)

// TestUpgradeSharing: upgrade keeps the recorded --sharing unless given anew, and "none" is recorded
// as no sharing.
func TestUpgradeSharing(t *testing.T) {
	rec := &record.Record{Namespace: "gpu-operator", Inputs: record.Inputs{Sharing: []string{"gpu-pool=time-slicing=4"}}}
	for _, tc := range []struct {
		name       string
		given      []string
		want       []string
		wantRecord []string
	}{
		{"without --sharing the recorded choice is kept", nil, []string{"gpu-pool=time-slicing=4"}, []string{"gpu-pool=time-slicing=4"}},
		{"--sharing replaces it", []string{"gpu-pool=mps=2"}, []string{"gpu-pool=mps=2"}, []string{"gpu-pool=mps=2"}},
		{"--sharing none takes it off, and the record keeps nothing", []string{"none"}, []string{"none"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &Upgrade{Clients: &kube.Clients{}}
			inst := u.install(rec, "v26.7.0", nil, UpgradeOptions{Sharing: tc.given}, nil)
			if !slices.Equal(inst.Options.Sharing, tc.want) {
				t.Errorf("install options' sharing %v, want %v", inst.Options.Sharing, tc.want)
			}
			if got := recordInputs(inst.Options, nil, nil).Sharing; !slices.Equal(got, tc.wantRecord) {
				t.Errorf("recorded %v, want %v", got, tc.wantRecord)
			}
		})
	}
}
