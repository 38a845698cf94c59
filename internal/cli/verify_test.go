package cli

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/engine"
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
		{"no node labelled a GPU node yet", notReadyError{fmt.Errorf("%w: no node is labelled", engine.ErrNoGPUNodes)}, ExitNotReady},
		{"nothing installed", notInstalledError{engine.ErrNotInstalled}, ExitNotInstalled},
		{"a selector that matches no GPU node", fmt.Errorf("%w: --nodes matches none", engine.ErrInput), ExitUsage},
		{"an interrupt", fmt.Errorf("verify: %w", context.Canceled), ExitInterrupted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if got := report(&b, tc.err); got != tc.want {
				t.Errorf("exit %d, want %d (%s)", got, tc.want, b.String())
			}
		})
	}
}
