package ui

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
)

// assertGolden compares out with testdata/name, rewriting it with -update.
func assertGolden(t *testing.T, name string, out []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(out, want) {
		t.Errorf("output differs from %s (run with -update after checking):\n%s", path, out)
	}
}

func TestPrintFleetStatusGolden(t *testing.T) {
	rec := &record.Record{OperatorVersion: "v26.7.0", Profile: "gke", Distribution: "gke", Command: "install", Result: "succeeded"}
	node := func(name string, validated bool) engine.NodeStatus {
		return engine.NodeStatus{Name: name, Validated: validated, GPUs: 1, Driver: "Ready", Toolkit: "Ready", DevicePlugin: "Ready"}
	}
	healthy := &engine.StatusResult{Installed: true, Healthy: true, Record: rec, Nodes: []engine.NodeStatus{node("gpu-1", true), node("gpu-2", true)},
		Checks: []engine.StatusCheck{{Name: "operator", State: engine.CheckOK, Message: "Deployment gpu-operator/gpu-operator available (v26.7.0)"}}}
	notReady := &engine.StatusResult{Installed: true, Record: &record.Record{OperatorVersion: "v25.10.1", Profile: "kubeadm"},
		Nodes: []engine.NodeStatus{node("gpu-1", true), node("gpu-2", false), node("gpu-3", false)},
		Checks: []engine.StatusCheck{
			{Name: "operator", State: engine.CheckOK, Message: "Deployment gpu-operator/gpu-operator available (v25.10.1)"},
			{Name: "gpu nodes", State: engine.CheckFailed, Message: "1/3 GPU nodes validated: gpu-2, gpu-3 have no ready\nvalidator"},
		}}
	notInstalled := &engine.StatusResult{Checks: []engine.StatusCheck{{Name: "install", State: engine.CheckNotInstalled, Message: "gpuctl has not installed the GPU stack on this cluster"}}}
	for _, tc := range []struct {
		name  string
		style Style
		doc   FleetStatus
	}{
		{name: "every context healthy", doc: FleetStatus{Contexts: []FleetStatusEntry{
			{Context: "gke-prod-us", State: "healthy", Result: healthy},
			{Context: "gke-prod-eu", State: "healthy", Result: healthy},
		}}},
		{name: "one not ready one not installed and one unreachable", style: Style{Color: true}, doc: FleetStatus{ExitCode: 9, Contexts: []FleetStatusEntry{
			{Context: "gke-prod-us", State: "healthy", Result: healthy},
			{Context: "lab", State: "not-ready", ExitCode: 4, Error: "the GPU stack is not ready", Result: notReady},
			{Context: "cpu-only", State: "not-installed", ExitCode: 7, Error: "nothing installed", Result: notInstalled},
			{Context: "edge-7", State: "unreachable", ExitCode: 9, Error: "cannot reach the Kubernetes API server at https://10.0.0.7:6443: connection refused"},
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := PrintFleetStatus(&buf, &tc.doc, tc.style); err != nil {
				t.Fatal(err)
			}
			assertGolden(t, "fleet-status-"+sentenceFile(tc.name)+".txt", buf.Bytes())
		})
	}
}

func TestPrintFleetVerifyGolden(t *testing.T) {
	passed := func(node string) engine.NodeVerification {
		return engine.NodeVerification{Node: node, Outcome: engine.VerifyPassed, Duration: plan.Duration(2 * time.Second)}
	}
	for _, tc := range []struct {
		name  string
		style Style
		doc   FleetVerify
	}{
		{name: "every context passed", doc: FleetVerify{Contexts: []FleetVerifyEntry{
			{Context: "east", State: "passed", Result: &engine.VerifyResult{Passed: true, Nodes: []engine.NodeVerification{passed("gpu-1"), passed("gpu-2")}}},
			{Context: "west", State: "passed", Result: &engine.VerifyResult{Passed: true, Nodes: []engine.NodeVerification{passed("gpu-1")}}},
		}}},
		{name: "failed nodes a dry run and a locked context", style: Style{Color: true}, doc: FleetVerify{ExitCode: 6, Contexts: []FleetVerifyEntry{
			{Context: "east", State: "failed", ExitCode: 8, Error: "1 of 3 GPU nodes did not pass", Result: &engine.VerifyResult{Nodes: []engine.NodeVerification{passed("gpu-1"),
				{Node: "gpu-2", Outcome: engine.VerifyFailed, Reason: "container vectoradd exited with code 1 (Error)"},
				{Node: "gpu-3", Outcome: engine.VerifyUnschedulable, Reason: "0/6 nodes are available"}}}},
			{Context: "west", State: "planned", Result: &engine.VerifyResult{DryRun: true, Plan: &plan.VerifyPlan{
				Create: []plan.VerifyPod{{Name: "a"}, {Name: "b"}}}}},
			{Context: "lab", State: "locked", ExitCode: 6, Error: "install lock held by gpuctl install (pid 4242 on ci-runner-3)"},
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := PrintFleetVerify(&buf, &tc.doc, tc.style); err != nil {
				t.Fatal(err)
			}
			assertGolden(t, "fleet-verify-"+sentenceFile(tc.name)+".txt", buf.Bytes())
		})
	}
}
