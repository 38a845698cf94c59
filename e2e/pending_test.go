package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
)

// A `helm upgrade --wait` that plain Helm is running on a gpuctl release, started before gpuctl took
// its install lock, is another writer at work, not a leftover: gpuctl install refuses with the lock's
// exit code and Helm's words, names the command that recovers the release once that upgrade is
// over, and leaves the release as Helm has it. Once the upgrade is over (its process killed), that
// command and gpuctl install bring the release back.
func TestInstallLeavesHelmsUpgradeInProgressAlone(t *testing.T) {
	t.Parallel()
	bin, err := helmCLI()
	if err != nil {
		t.Fatal(err)
	}
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 1}})
	const op = "gpu-operator"
	if code, _, stderr := gpuctl(t, c, "install"); code != 0 {
		t.Fatalf("gpuctl install exited %d:\n%s", code, stderr)
	}

	// An upgrade that cannot become ready (the operator's new pod fits no node): Helm waits, and the
	// release stays pending-upgrade while it does.
	logPath := filepath.Join(t.TempDir(), "helm-upgrade.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	upgrade := helmCommand(t, c, bin, "upgrade", op, chartDir(t, op), "--reuse-values", "-n", "gpu-operator",
		"--set-string", "operator.nodeSelector.gpuctl-e2e-nowhere=true", "--wait", "--timeout", "30m")
	upgrade.Stdout, upgrade.Stderr = log, log
	if err := upgrade.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helmProcess{cmd: upgrade, log: logPath, done: make(chan struct{})}
	go func() { h.err = upgrade.Wait(); close(h.done) }()
	defer h.kill()
	h.waitFor(t, func() bool { return history(t, c, op) == "1:deployed 2:pending-upgrade" })
	before := releaseHistory(t, c, op)

	t.Run("gpuctl install refuses with exit 6, Helm's words and the command that recovers the release", func(t *testing.T) {
		code, _, stderr := gpuctl(t, c, "install")
		if code != cli.ExitLocked {
			t.Fatalf("exit %d, want %d (another writer):\n%s", code, cli.ExitLocked, stderr)
		}
		for _, want := range []string{
			"release gpu-operator revision 2 is pending-upgrade: another operation (install/upgrade/rollback) is in progress (not by gpuctl)",
			"helm rollback gpu-operator 1 -n gpu-operator",
		} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr does not say %q:\n%s", want, stderr)
			}
		}
		after := releaseHistory(t, c, op)
		if len(after) != len(before) {
			t.Fatalf("history %s: revisions were added or removed", history(t, c, op))
		}
		for i := range before {
			if b, a := before[i], after[i]; a.Revision != b.Revision || a.Status != b.Status || !a.Updated.Equal(b.Updated) || a.Description != b.Description {
				t.Errorf("revision %d changed: %+v, was %+v", b.Revision, a, b)
			}
		}
		select {
		case <-h.done:
			t.Fatalf("helm upgrade ended (%v) while gpuctl ran:\n%s", h.err, h.output())
		default:
		}
	})

	t.Run("once that upgrade is over, the command gpuctl named and gpuctl install bring the release back", func(t *testing.T) {
		h.kill() // what a person does before recovering: the upgrade is over
		if code, out := helmBin(t, c, bin, "rollback", op, "1", "-n", "gpu-operator"); code != 0 {
			t.Fatalf("helm rollback exited %d: %s", code, out)
		}
		res, _ := installJSON(t, c)
		if res.Changed {
			t.Errorf("changed after the rollback to gpuctl's revision: %+v", res.Steps)
		}
		// Helm's rollback supersedes the deployed revisions and leaves the one it replaced as it was.
		if got := history(t, c, op); got != "1:superseded 2:pending-upgrade 3:deployed" {
			t.Errorf("history %s", got)
		}
	})
}

// helmProcess is a Helm CLI command running in the background.
type helmProcess struct {
	cmd  *exec.Cmd
	log  string // its output
	done chan struct{}
	err  error // its end, once done is closed
}

func (h *helmProcess) output() string {
	b, _ := os.ReadFile(h.log)
	return string(b)
}

// kill ends the process (as SIGKILL ends it: no clean-up of Helm's) and waits for it.
func (h *helmProcess) kill() {
	select {
	case <-h.done:
	default:
		_ = h.cmd.Process.Kill()
		<-h.done
	}
}

// waitFor polls until ok (a bounded wait for the process's write, not a timed assertion); it fails
// the test with the process's output if the process ends first.
func (h *helmProcess) waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for !ok() {
		select {
		case <-h.done:
			t.Fatalf("helm ended (%v) before it wrote what the test waits for:\n%s", h.err, h.output())
		case <-ctx.Done():
			t.Fatalf("helm did not write what the test waits for:\n%s", h.output())
		case <-tick.C:
		}
	}
}
