package ui

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/engine"
)

// Nothing installed is not a failure (gpuctl issue 36, item 9): status says so in its own words, and a
// fleet where the other clusters are healthy is not marked failed.
func TestNothingInstalledIsNotAFailure(t *testing.T) {
	notInstalled := &engine.StatusResult{Checks: []engine.StatusCheck{{Name: "install", State: engine.CheckNotInstalled,
		Message: "gpuctl has not installed the GPU stack on this cluster", Hint: "run gpuctl install"}}}
	healthy := &engine.StatusResult{Installed: true, Healthy: true}

	t.Run("status", func(t *testing.T) {
		var buf bytes.Buffer
		if err := PrintStatus(&buf, notInstalled, Style{}); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if strings.Contains(out, "FAILED") || !strings.HasPrefix(out, "not installed install: ") && !strings.HasPrefix(out, "not installed: ") {
			t.Errorf("status with nothing installed:\n%s", out)
		}
	})
	t.Run("a fleet of a healthy cluster and an empty one", func(t *testing.T) {
		var buf bytes.Buffer
		doc := FleetStatus{ExitCode: 7, Contexts: []FleetStatusEntry{
			{Context: "prod", State: "healthy", Result: healthy},
			{Context: "cpu-only", State: "not-installed", ExitCode: 7, Error: "nothing installed", Result: notInstalled},
		}}
		if err := PrintFleetStatus(&buf, &doc, Style{}); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if strings.Contains(out, "FAILED") || !strings.Contains(out, "Fleet: warning 1/2 contexts healthy, 1 with nothing installed") {
			t.Errorf("fleet status:\n%s", out)
		}
	})
}
