package ui

import (
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/detect"
)

func TestPrintTaintingSaysWhatDecidesTheTaint(t *testing.T) {
	yes, no := &detect.Finding{Detected: true}, &detect.Finding{}
	open := detect.Scheduling{GPUWorkers: []string{"gpu-1"}, OpenWorkers: []string{"cpu-1"}, OpenNodes: []string{"cpu-1"}}
	for _, tc := range []struct {
		name string
		r    detect.Result
		want []string
	}{
		{"the API server adds the toleration", detect.Result{Scheduling: open, Admission: detect.Admission{GPUToleration: yes, MutatingAdmissionPolicy: no}},
			[]string{"GPU toleration:           the API server adds it", "MutatingAdmissionPolicy:  not served", "install:                  taints them"}},
		{"gpuctl can add it with a policy", detect.Result{Scheduling: open, Admission: detect.Admission{GPUToleration: no, MutatingAdmissionPolicy: yes}},
			[]string{"not added by the API server", "served: gpuctl can add the toleration itself", "install:                  taints them"}},
		{"nothing adds it", detect.Result{Scheduling: open, Admission: detect.Admission{GPUToleration: no, MutatingAdmissionPolicy: no}},
			[]string{"not added by the API server", "not served", "does not taint them by default"}},
		{"every schedulable node is a GPU node", detect.Result{Scheduling: detect.Scheduling{GPUWorkers: []string{"gpu-1"}, AllWorkersGPU: true, AllSchedulableGPU: true},
			Admission: detect.Admission{GPUToleration: yes}},
			[]string{"does not taint them by default: every schedulable node is a GPU node"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := printTainting(&b, &tc.r); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}
