package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// signalledRun is one gpuctl install process that got sig when its progress said step had started.
type signalledRun struct {
	code     int  // exit code; -1 when killed by a signal
	signaled bool // ended by a signal (SIGKILL)
	sent     bool // the step started and the signal was sent
	stderr   string
	result   engine.InstallResult // stdout's -o json, when there was one
}

// installAndSignal runs gpuctl install as a process and sends it sig when its JSON progress reports
// that step has started: the test reacts to gpuctl's own events, not to a sleep.
func installAndSignal(t *testing.T, c *sandbox.Cluster, bin, step string, sig syscall.Signal) signalledRun {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, "--kubeconfig", c.Kubeconfig, "--progress", "json", "install", "-o", "json", "--timeout", "5m")
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var r signalledRun
	var stderr strings.Builder
	sc := bufio.NewScanner(errPipe)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		stderr.WriteString(line + "\n")
		var ev event.Event
		if r.sent || json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		if ev.Type == event.StepStarted && ev.Step == step {
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatalf("signal %s: %v", sig, err)
			}
			r.sent = true
		}
	}
	err = cmd.Wait()
	r.stderr = stderr.String()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.signaled = true
		}
	default:
		t.Fatalf("gpuctl install: %v", err)
	}
	if stdout.Len() > 0 {
		if err := json.Unmarshal(stdout.Bytes(), &r.result); err != nil {
			t.Errorf("install -o json: %v\n%s", err, stdout.String())
		}
	}
	t.Logf("gpuctl install, %s at step %s → exit %d (signalled %v)\n%s", sig, step, r.code, r.signaled, r.stderr)
	return r
}

// releaseStates reads every release's history: no release may have two deployed revisions, lose its
// history (a reinstall), or, after an interrupt that let Helm finish, be left pending.
func releaseStates(t *testing.T, c *sandbox.Cluster, names ...string) map[string][]*release.Release {
	t.Helper()
	out := map[string][]*release.Release{}
	for _, n := range names {
		hist := releaseHistory(t, c, n)
		deployed := 0
		for _, r := range hist {
			if r.Status == "deployed" {
				deployed++
			}
		}
		if deployed > 1 {
			t.Errorf("release %s has %d deployed revisions", n, deployed)
		}
		out[n] = hist
	}
	return out
}

// onlyWaitsFrom reports whether steps[i:] are all waits, which write nothing.
func onlyWaitsFrom(steps []plan.Step, i int) bool {
	for _, s := range steps[i:] {
		if !strings.HasPrefix(string(s.Kind), "wait-") {
			return false
		}
	}
	return true
}

// TestInterruptAtEveryStep interrupts gpuctl install at every step of its plan, once with SIGINT
// (Ctrl-C) and once with SIGKILL, each on its own sandbox. The runs form a chain: run k is
// interrupted at step k, so it redoes what run k-1 left unfinished and stops in a step no earlier run
// reached. SIGINT must exit 130 with a summary naming the step in flight and the state it left (read
// back from the cluster, and true: a release it names is in that state), and never leave a release
// pending; SIGKILL leaves whatever it leaves, including a held lock. After every run no release has
// two deployed revisions or lost its history, and a last run converges to every GPU node validated.
func TestInterruptAtEveryStep(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts sandboxes (a real control plane); -short skips them, and the gpuctl binary's build with them")
	}
	bin, err := gpuctlBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1}})
			code, stdout, _ := gpuctl(t, c, "install", "--dry-run", "-o", "json")
			if code != 0 {
				t.Fatalf("dry run exited %d", code)
			}
			var p plan.Plan
			if err := json.Unmarshal([]byte(stdout), &p); err != nil {
				t.Fatal(err)
			}
			var steps []plan.Step
			var releases []string
			for _, s := range p.Steps {
				if s.Skip == "" {
					steps = append(steps, s)
				}
				if s.Release != nil {
					releases = append(releases, s.Release.Name)
				}
			}
			firstRevision := map[string]time.Time{}
			for i, s := range steps {
				start := time.Now()
				r := installAndSignal(t, c, bin, s.ID, sig)
				if !r.sent {
					t.Fatalf("step %s never started: exit %d", s.ID, r.code)
				}
				switch {
				case r.code == 0 && onlyWaitsFrom(steps, i):
					// The waits can end before the signal lands when the cluster has converged (an
					// earlier run's operator kept working after that run stopped): nothing to interrupt.
					t.Logf("the run finished before %s reached it", sig)
				case sig == syscall.SIGKILL:
					if !r.signaled {
						t.Errorf("step %s: SIGKILL, but exit %d", s.ID, r.code)
					}
				default:
					assertInterrupted(t, c, r, p.Steps, s.ID)
				}
				t.Logf("step %s: %s", s.ID, time.Since(start).Round(time.Millisecond))
				for name, hist := range releaseStates(t, c, releases...) {
					if len(hist) == 0 {
						continue
					}
					first := hist[0].Updated
					if hist[0].Revision != 1 {
						t.Errorf("release %s: history starts at revision %d", name, hist[0].Revision)
					}
					if was, ok := firstRevision[name]; ok && hist[0].Status != "pending-install" && !was.Equal(first) {
						t.Errorf("release %s was reinstalled after its first revision (%s, now %s)", name, was, first)
					}
					if hist[0].Status != "pending-install" {
						firstRevision[name] = first
					}
				}
			}
			code, stdout, stderr := gpuctl(t, c, "install", "-o", "json")
			if code != 0 {
				t.Fatalf("the run after the interrupts exited %d:\n%s", code, stderr)
			}
			var res engine.InstallResult
			if err := json.Unmarshal([]byte(stdout), &res); err != nil {
				t.Fatal(err)
			}
			if want := simulatedGPUNodes(c); strings.Join(res.GPUNodes, ",") != strings.Join(want, ",") {
				t.Errorf("validated %v, want %v", res.GPUNodes, want)
			}
			for name, hist := range releaseStates(t, c, releases...) {
				if last := hist[len(hist)-1]; last.Status != "deployed" {
					t.Errorf("release %s ends %s revision %d", name, last.Status, last.Revision)
				}
			}
			assertReconciled(t, c, res.Plan.Step("wait-clusterpolicy").Target)
		})
	}
}

// assertInterrupted checks a SIGINT run: exit 130, a summary that names where it stopped, at or after
// the step it was signalled in, with every earlier step finished; and the state it reports is true.
func assertInterrupted(t *testing.T, c *sandbox.Cluster, r signalledRun, steps []plan.Step, signalled string) {
	t.Helper()
	i := slices.IndexFunc(steps, func(s plan.Step) bool { return s.ID == signalled })
	if r.code != cli.ExitInterrupted {
		t.Errorf("step %s: SIGINT exited %d, want %d", signalled, r.code, cli.ExitInterrupted)
		return
	}
	if strings.Contains(r.stderr, "goroutine ") {
		t.Errorf("step %s: a stack trace on stderr", signalled)
	}
	ie := r.result.Interrupted
	if ie == nil {
		t.Errorf("step %s: no interrupted summary in -o json", signalled)
		return
	}
	if !strings.Contains(r.stderr, "gpuctl: interrupted") || !strings.Contains(r.stderr, runner.ResumeHint) {
		t.Errorf("step %s: stderr lacks the summary and the way on", signalled)
	}
	stoppedAt := len(ie.Finished) // index of the step in flight, or of the first not started
	if stoppedAt < i {
		t.Errorf("step %s: stopped at step %d, before the one signalled (%d)", signalled, stoppedAt+1, i+1)
	}
	for k, f := range ie.Finished {
		if k < len(steps) && f.ID != steps[k].ID {
			t.Errorf("step %s: finished[%d] = %s, want %s", signalled, k, f.ID, steps[k].ID)
		}
	}
	if ie.InFlight != nil {
		if !regexp.MustCompile(`(?m)^\s+in flight:\s+` + regexp.QuoteMeta(ie.InFlight.ID+": "+ie.InFlight.Message) + `$`).MatchString(r.stderr) {
			t.Errorf("step %s: the summary does not name the step in flight and its state", signalled)
		}
		if ie.InFlight.Message == "" || strings.HasPrefix(ie.InFlight.Message, "its state could not be read") {
			t.Errorf("step %s: in-flight state %q", signalled, ie.InFlight.Message)
		}
	}
	// A release step is let finish: never pending after a SIGINT, and the state it names is Helm's.
	for _, st := range steps {
		if st.Release == nil {
			continue
		}
		hist := releaseStates(t, c, st.Release.Name)[st.Release.Name]
		if len(hist) == 0 {
			continue
		}
		last := hist[len(hist)-1]
		if strings.HasPrefix(last.Status, "pending") {
			t.Errorf("step %s: release %s left %s after SIGINT", signalled, last.Name, last.Status)
		}
		if ie.InFlight != nil && ie.InFlight.ID == st.ID {
			if want := fmt.Sprintf("release %s: %s revision %d", last.Name, last.Status, last.Revision); ie.InFlight.Message != want {
				t.Errorf("step %s: reported %q, Helm says %q", signalled, ie.InFlight.Message, want)
			}
		}
	}
}
