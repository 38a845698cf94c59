package ui

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
)

func TestPrintVerifyGolden(t *testing.T) {
	healthy := []engine.NodeVerification{
		{Node: "gpu-worker-1", Pod: "gpuctl-verify-gpu-worker-1-a1b2c3", Outcome: engine.VerifyPassed, Duration: plan.Duration(1200 * time.Millisecond)},
		{Node: "gpu-worker-2", Pod: "gpuctl-verify-gpu-worker-2-a1b2c3", Outcome: engine.VerifyPassed, Duration: plan.Duration(3 * time.Second)},
	}
	for _, tc := range []struct {
		name  string
		style Style
		res   engine.VerifyResult
	}{
		{name: "every node passed", res: engine.VerifyResult{RunID: "a1b2c3", Namespace: "gpu-operator", Image: engine.DefaultVerifyImage, Passed: true, Nodes: healthy,
			Removed: []string{"gpuctl-verify-gpu-worker-1-a1b2c3", "gpuctl-verify-gpu-worker-2-a1b2c3"}}},
		{name: "one node failed and one is unschedulable", style: Style{Color: true}, res: engine.VerifyResult{RunID: "a1b2c3", Namespace: "gpu-operator", Image: "mirror.example.com/cuda-sample:vectoradd",
			Nodes: append(append([]engine.NodeVerification{}, healthy[0]),
				engine.NodeVerification{Node: "gpu-worker-2", Pod: "gpuctl-verify-gpu-worker-2-a1b2c3", Outcome: engine.VerifyFailed,
					Reason: "container vectoradd exited with code 1 (Error)",
					Logs:   []string{"[Vector addition of 50000 elements]", "Failed to allocate device vector A (error code no CUDA-capable device is detected)!"},
					Events: []string{"Normal Scheduled: Successfully assigned gpu-operator/gpuctl-verify-gpu-worker-2-a1b2c3 to gpu-worker-2"}},
				engine.NodeVerification{Node: "gpu-worker-3", Pod: "gpuctl-verify-gpu-worker-3-a1b2c3", Outcome: engine.VerifyUnschedulable,
					Reason: "0/6 nodes are available: 1 node(s) were unschedulable, 5 node(s) didn't match Pod's node affinity/selector.",
					Events: []string{"Warning FailedScheduling: 0/6 nodes are available: 1 node(s) were unschedulable."}}),
			RemovedEarlier: []string{"gpuctl-verify-gpu-worker-1-ffffff"},
			Removed:        []string{"a", "b", "c"}}},
		{name: "each node says what its pod asked for", res: engine.VerifyResult{RunID: "a1b2c3", Namespace: "gpu-operator", Image: engine.DefaultVerifyImage,
			Nodes: []engine.NodeVerification{
				{Node: "a100-1", Pod: "gpuctl-verify-a100-1-a1b2c3", Outcome: engine.VerifyPassed, Resource: "nvidia.com/mig-1g.5gb", Duration: plan.Duration(2 * time.Second)},
				{Node: "dra-1", Pod: "gpuctl-verify-dra-1-a1b2c3", Outcome: engine.VerifyPassed, DeviceClass: "gpu.nvidia.com", Duration: plan.Duration(2 * time.Second)},
				{Node: "l4-1", Pod: "gpuctl-verify-l4-1-a1b2c3", Outcome: engine.VerifyUnschedulable, Resource: "nvidia.com/gpu",
					Reason: "0/3 nodes are available: 1 Insufficient nvidia.com/gpu."},
			},
			Removed:               []string{"gpuctl-verify-a100-1-a1b2c3", "gpuctl-verify-dra-1-a1b2c3", "gpuctl-verify-l4-1-a1b2c3"},
			RemovedClaimTemplates: []string{"gpuctl-verify-a1b2c3"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := PrintVerify(&buf, &tc.res, tc.style); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "verify-"+sentenceFile(tc.name)+".txt")
			if *update {
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if buf.String() != string(want) {
				t.Errorf("output differs from %s (run with -update after checking):\n%s", path, buf.String())
			}
		})
	}
}

func sentenceFile(name string) string {
	b := []byte(name)
	for i, c := range b {
		if c == ' ' {
			b[i] = '-'
		}
	}
	return string(b)
}

// verify --dry-run as text names each pod's request and the ResourceClaimTemplate it creates and
// deletes.
func TestPrintVerifyPlanNamesEachRequestAndClaimTemplate(t *testing.T) {
	p := plan.BuildVerify(plan.VerifyInput{Namespace: "gpu-operator", Image: "img", Nodes: []string{"a100", "dra"}, RunID: "1a2b3c",
		Requests:              map[string]plan.VerifyRequest{"a100": {Resource: "nvidia.com/mig-1g.5gb"}, "dra": {DeviceClass: plan.DRADriverName}},
		EarlierClaimTemplates: []plan.VerifyPodRef{{Namespace: "gpu-operator", Name: "gpuctl-verify-ffffff", UID: "0c6f", Run: "ffffff"}}})
	var b bytes.Buffer
	if err := PrintVerifyPlan(&b, p); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  delete resourceclaimtemplate gpu-operator/gpuctl-verify-ffffff (uid 0c6f; left by an earlier verify run (ffffff))",
		"  create resourceclaimtemplate gpu-operator/gpuctl-verify-1a2b3c (one device of DeviceClass gpu.nvidia.com)",
		"  create pod gpu-operator/gpuctl-verify-a100-1a2b3c on node a100 (image img, one nvidia.com/mig-1g.5gb)",
		"  create pod gpu-operator/gpuctl-verify-dra-1a2b3c on node dra (image img, a ResourceClaim from gpuctl-verify-1a2b3c)",
		"  delete resourceclaimtemplate gpu-operator/gpuctl-verify-1a2b3c when the run ends, after the pods",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}
