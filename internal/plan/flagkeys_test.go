package plan

import (
	"maps"
	"sort"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/detect"
)

// leafPaths are the dotted paths of v's leaves (a list is a leaf).
func leafPaths(prefix string, v map[string]any) []string {
	var out []string
	for k, x := range v {
		if m, ok := x.(map[string]any); ok && len(m) > 0 {
			out = append(out, leafPaths(prefix+k+".", m)...)
			continue
		}
		out = append(out, prefix+k)
	}
	sort.Strings(out)
	return out
}

// covered: path is a key of keys, or under one.
func covered(path string, keys []string) bool {
	for _, k := range keys {
		if path == k || strings.HasPrefix(path, k+".") {
			return true
		}
	}
	return false
}

// TestFlagKeysCoverTheLayers builds a plan with each flag and checks that FlagKeys names every key its
// layer writes.
func TestFlagKeysCoverTheLayers(t *testing.T) {
	charts := maps.Clone(testCharts)
	charts[MonitoringRelease] = ChartInfo{Name: MonitoringRelease, Version: "0.1.0", AppVersion: "0.1.0"}
	for _, tc := range []struct {
		source string
		o      Options
		in     func(*Input)
	}{
		{MonitoringSource, Options{Monitoring: true}, nil},
		{SharingSource, Options{Sharing: []string{"time-slicing=4", "l4=mps=2"}}, nil},
		{MIGSource, Options{MIG: []string{"mixed", "a100=all-1g.5gb"}}, nil},
		{DRASource, Options{DRA: true}, nil},
		{PrecompiledSource, Options{Precompiled: PrecompiledAuto}, func(in *Input) { in.Precompiled = threeNodes() }},
	} {
		t.Run(tc.source, func(t *testing.T) {
			det := detection("gke", withPrometheus(true), func(r *detect.Result) {
				r.KubernetesVersion = "1.37.0"
				r.GPUNodes = []detect.GPUNode{{Name: "a-1", Pool: "a100", Product: "nvidia-tesla-a100"}, {Name: "l-1", Pool: "l4", Product: "nvidia-l4"}}
			})
			if tc.source == PrecompiledSource {
				det = detection("kubeadm")
			}
			in := Input{Detection: det, Profile: fakeProfiles, Charts: charts, Options: tc.o}
			if tc.in != nil {
				tc.in(&in)
			}
			p, err := Build(in)
			if err != nil {
				t.Fatal(err)
			}
			layer := operatorLayer(p, tc.source)
			if len(layer) == 0 {
				t.Fatalf("the plan has no %s layer", tc.source)
			}
			keys := leafPaths("", FlagKeys(tc.o))
			for _, path := range leafPaths("", layer) {
				if !covered(path, keys) {
					t.Errorf("%s writes %s, which FlagKeys does not name (it names %v)", tc.source, path, keys)
				}
			}
		})
	}
}
