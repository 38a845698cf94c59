package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"
)

// StartT starts a sandbox for a test and stops it when the test ends. When the test failed, the tail
// of every component's log is printed first. In -short mode the test is skipped: a sandbox is a real
// control plane, and the first one on a machine builds Kubernetes.
func StartT(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real Kubernetes control plane; skipped in -short mode")
	}
	if opts.Progress == nil {
		opts.Progress = testWriter{t}
	}
	// Generous: a cold tool cache builds Kubernetes first (about 15 minutes on 2 cores).
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start sandbox: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sandbox logs (%s):\n%s", c.Dir, c.LogTails(80))
		}
		c.Stop()
	})
	return c
}

// testWriter sends progress lines to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
