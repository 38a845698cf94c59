package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/engine"
)

// triggerWriter collects what gpuctl writes and calls fire once, in its own goroutine, when a line
// containing trigger is written: the test reacts to gpuctl's own progress events, not to a sleep.
type triggerWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	trigger string
	fire    func()
	fired   bool
}

func (w *triggerWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if !w.fired && strings.Contains(w.buf.String(), w.trigger) {
		w.fired = true
		go w.fire()
	}
	return n, err
}

// hasFired: the trigger was seen and fire started.
func (w *triggerWriter) hasFired() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fired
}

func (w *triggerWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestInstallSurvivesAnAPIServerRestart restarts kube-apiserver while gpuctl waits for the operator
// and the validators (as a control-plane upgrade would): gpuctl's watches re-establish, transient
// errors are retried, and the install still ends with every GPU node validated.
func TestInstallSurvivesAnAPIServerRestart(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1}})
	var restarted time.Time
	restartErr := make(chan error, 1)
	errOut := &triggerWriter{trigger: "Wait for the operator Deployment", fire: func() {
		err := c.RestartAPIServer(context.Background())
		restarted = time.Now()
		restartErr <- err
	}}
	var out bytes.Buffer
	args := []string{"--kubeconfig", c.Kubeconfig, "--progress", "plain", "install", "-o", "json", "--timeout", "5m"}
	code := cli.Run(t.Context(), cli.Streams{In: strings.NewReader(""), Out: &out, Err: errOut}, args, func(string) string { return "" })
	finished := time.Now()
	t.Logf("gpuctl install → exit %d\n%s", code, errOut.String())
	if !errOut.hasFired() {
		t.Fatal("the API server was never restarted: gpuctl never started waiting for the operator")
	}
	// The restart began while gpuctl ran; wait for its outcome (the test's deadline bounds it).
	select {
	case err := <-restartErr:
		if err != nil {
			t.Fatalf("restart kube-apiserver: %v", err)
		}
	case <-t.Context().Done():
		t.Fatal("the API server restart never ended")
	}
	if restarted.After(finished) {
		t.Fatalf("the API server came back at %s, after gpuctl had finished at %s: the restart proved nothing", restarted, finished)
	}
	if code != 0 {
		t.Fatalf("install across an API server restart exited %d", code)
	}
	var res engine.InstallResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.GPUNodes) != 2 {
		t.Errorf("validated %v, want both GPU nodes", res.GPUNodes)
	}
	assertReconciled(t, c, res.Plan.Step("wait-clusterpolicy").Target)
	if code, _, stderr := gpuctl(t, c, "install"); code != cli.ExitOK {
		t.Errorf("a second install after the restart exited %d:\n%s", code, stderr)
	}
}
