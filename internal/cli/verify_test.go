package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/runner"
	"github.com/gpuctl/gpuctl/internal/ui"
)

// Mistakes in verify's command line are refused before any cluster is contacted.
func TestVerifyRefusesInputMistakes(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a --nodes that is not a label selector", []string{"--nodes", "pool in (a"}, "is not a label selector"},
		{"a wrong output format", []string{"-o", "xml"}, "-o must be one of"},
		{"a timeout that is not positive", []string{"--timeout", "0s"}, "must be positive"},
		{"an argument", []string{"gpu-1"}, "unknown command"},
		{"a wrong output format in a dry run", []string{"--dry-run", "-o", "xml"}, "-o must be one of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := run(t, nil, append([]string{"verify", "--kubeconfig", "/nonexistent"}, tc.args...)...)
			if code != ExitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, want %d with %q: %s", code, ExitUsage, tc.want, errOut)
			}
		})
	}
}

func TestVerifyExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"a node that did not pass", verifyFailedError{fmt.Errorf("%w: 1 of 3 GPU node(s) did not pass", engine.ErrVerifyFailed)}, ExitVerifyFailed},
		{"no node labelled a GPU node yet", notReadyError{fmt.Errorf("%w: no node is labelled", engine.ErrNoLabelledGPUNodes)}, ExitNotReady},
		{"nothing installed", notInstalledError{engine.ErrNotInstalled}, ExitNotInstalled},
		{"a selector that matches no GPU node", fmt.Errorf("%w: --nodes matches none", plan.ErrInput), ExitUsage},
		{"an interrupt", fmt.Errorf("verify: %w", context.Canceled), ExitInterrupted},
		{"a permission missing", fmt.Errorf("%w: you may not delete pods in gpu-operator", preflight.ErrFailed), ExitPreflight},
		{"the run's pods left", fmt.Errorf("%w: forbidden", engine.ErrPodsLeft), ExitError},
		{"the run's pods left, and a node that did not pass", verifyError(errors.Join(fmt.Errorf("%w: 1 of 3", engine.ErrVerifyFailed), engine.ErrPodsLeft)), ExitVerifyFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if got := report(&b, tc.err); got != tc.want {
				t.Errorf("exit %d, want %d (%s)", got, tc.want, b.String())
			}
		})
	}
}

func verifyPlanFixture() *plan.VerifyPlan {
	return plan.BuildVerify(plan.VerifyInput{Namespace: "gpu-operator", Image: engine.DefaultVerifyImage, ImagePullSecrets: []string{"mirror"},
		Nodes: []string{"gpu-1", "gpu-2"}, RunID: "1a2b3c",
		Earlier: []plan.VerifyPodRef{{Namespace: "gpu-operator", Name: "gpuctl-verify-gpu-1-ffffff", UID: "0b5e", Run: "ffffff"}}})
}

// verify --dry-run prints the plan: for a person, every pod it deletes (with UID and why) and creates;
// as -o json and -o yaml, a VerifyResult document with dryRun and the plan, matching its schema.
func TestVerifyDryRunOutput(t *testing.T) {
	p := verifyPlanFixture()
	res := &engine.VerifyResult{RunID: p.RunID, Namespace: p.Namespace, Image: p.Image, DryRun: true, Plan: p}
	t.Run("as text it names every pod it deletes and creates", func(t *testing.T) {
		var b bytes.Buffer
		if err := writeVerify(&b, "text", res, nil, ui.Style{}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"gpuctl verify would (run 1a2b3c):",
			"  delete pod gpu-operator/gpuctl-verify-gpu-1-ffffff (uid 0b5e; left by an earlier verify run (ffffff))",
			"  create pod gpu-operator/gpuctl-verify-gpu-1-1a2b3c on node gpu-1 (image " + engine.DefaultVerifyImage + ", pulled with mirror, one nvidia.com/gpu)",
			"  create pod gpu-operator/gpuctl-verify-gpu-2-1a2b3c on node gpu-2 (image ",
			"  delete pod gpu-operator/gpuctl-verify-gpu-2-1a2b3c when the run ends",
		} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("text lacks %q:\n%s", want, b.String())
			}
		}
	})
	for _, format := range []string{"json", "yaml"} {
		t.Run("as "+format+" it is a VerifyResult with the plan, matching its schema", func(t *testing.T) {
			var b bytes.Buffer
			if err := writeVerify(&b, format, res, nil, ui.Style{}); err != nil {
				t.Fatal(err)
			}
			doc := b.Bytes()
			if format == "yaml" {
				var err error
				if doc, err = yaml.YAMLToJSON(doc); err != nil {
					t.Fatal(err)
				}
			}
			validateDocument(t, doc)
			var got struct {
				Kind   string
				DryRun bool             `json:"dryRun"`
				Plan   *plan.VerifyPlan `json:"plan"`
				Done   *plan.VerifyPlan `json:"done"`
			}
			if err := json.Unmarshal(doc, &got); err != nil {
				t.Fatal(err)
			}
			if got.Kind != "VerifyResult" || !got.DryRun || got.Done != nil || !reflect.DeepEqual(got.Plan, p) {
				t.Errorf("document %s, want the plan %+v", doc, p)
			}
		})
	}
}

// A run's -o json says what it did in the plan's shape, beside the plan, and matches the schema.
func TestVerifyRunOutputReportsWhatItDid(t *testing.T) {
	p := verifyPlanFixture()
	res := &engine.VerifyResult{RunID: p.RunID, Namespace: p.Namespace, Image: p.Image, Passed: true, Plan: p, Done: verifyPlanFixture(),
		Nodes: []engine.NodeVerification{{Node: "gpu-1", Pod: p.Create[0].Name, Outcome: engine.VerifyPassed}, {Node: "gpu-2", Pod: p.Create[1].Name, Outcome: engine.VerifyPassed}}}
	var b bytes.Buffer
	if err := writeVerify(&b, "json", res, nil, ui.Style{}); err != nil {
		t.Fatal(err)
	}
	validateDocument(t, b.Bytes())
	var got engine.VerifyResult
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.DryRun || !reflect.DeepEqual(got.Done, p) {
		t.Errorf("done %+v, want %+v", got.Done, p)
	}
}

// An interrupted verify writes its result (the steps, the pods it removed) as -o json, nothing as
// text (it has no verdicts), and exits 130 saying where it stopped and how to go on.
func TestVerifyInterruptedOutput(t *testing.T) {
	p := verifyPlanFixture()
	wait := runner.StepResult{ID: "wait", Title: "Wait for each pod's verdict", Outcome: event.StepInterrupted,
		Message: "nothing changed (it was waiting): gpu-1 waiting (ContainerCreating); gpu-2 passed"}
	steps := []runner.StepResult{{ID: "delete-earlier", Outcome: event.StepSucceeded}, {ID: "create", Outcome: event.StepSucceeded, Changed: true}, wait,
		{ID: "delete", Title: "Delete this run's pods", Outcome: event.StepSucceeded, Changed: true}}
	res := &engine.VerifyResult{RunID: p.RunID, Namespace: p.Namespace, Image: p.Image, Plan: p, Done: p, Removed: p.DeleteAtEnd, Steps: steps}
	ie := &runner.InterruptedError{Finished: steps[:2], InFlight: &wait, Count: 3, Resume: engine.VerifyResume}
	res.Interrupted = ie

	var b bytes.Buffer
	if err := writeVerify(&b, "json", res, ie, ui.Style{}); err != ie {
		t.Errorf("err = %v, want the interrupt", err)
	}
	validateDocument(t, b.Bytes())
	var got engine.VerifyResult
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Steps) != 4 || len(got.Removed) != 2 || got.Interrupted == nil || got.Interrupted.InFlight.ID != "wait" {
		t.Errorf("-o json of an interrupted run: %s", b.String())
	}

	b.Reset()
	if err := writeVerify(&b, "text", res, ie, ui.Style{}); err != ie || b.Len() != 0 {
		t.Errorf("as text: err %v, stdout %q", err, b.String())
	}

	if code := report(&b, ie); code != ExitInterrupted {
		t.Errorf("exit %d, want %d", code, ExitInterrupted)
	}
	for _, want := range []string{"interrupted during step 3/3, Wait for each pod's verdict", "in flight:", "gpu-1 waiting (ContainerCreating)", "To go on, run gpuctl verify again"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

// A run whose pods could not be removed still prints its verdicts, and fails.
func TestVerifyPodsLeftOutput(t *testing.T) {
	p := verifyPlanFixture()
	res := &engine.VerifyResult{RunID: p.RunID, Namespace: p.Namespace, Image: p.Image, Passed: true, Plan: p, Done: &plan.VerifyPlan{},
		Nodes: []engine.NodeVerification{{Node: "gpu-1", Pod: p.Create[0].Name, Outcome: engine.VerifyPassed}, {Node: "gpu-2", Pod: p.Create[1].Name, Outcome: engine.VerifyPassed}}}
	left := fmt.Errorf("%w: forbidden; they may hold GPUs", engine.ErrPodsLeft)
	var b bytes.Buffer
	if err := writeVerify(&b, "text", res, left, ui.Style{}); !errors.Is(err, engine.ErrPodsLeft) {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(b.String(), "gpu-1") || !strings.Contains(b.String(), "gpu-2") {
		t.Errorf("the verdicts are not printed:\n%s", b.String())
	}
}
