package engine

import (
	"strings"
	"testing"
)

// TestUnreadValues: install and template name the user's values NVIDIA's chart of the release does
// not read (with NVIDIA's rename), and not the ones it reads, gpuctl's own keys or NFD's section.
func TestUnreadValues(t *testing.T) {
	user := map[string]any{
		"driver":                 map[string]any{"enabled": false, "useOpenKernelModules": true},
		"gpuTolerationPolicy":    map[string]any{"enabled": true},
		"node-feature-discovery": map[string]any{"worker": map[string]any{"x": 1}},
	}
	w, err := unreadValues("v26.7.0", user)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(w, "driver.useOpenKernelModules (NVIDIA renamed it driver.kernelModuleType)") {
		t.Errorf("warning %q does not name the renamed key", w)
	}
	for _, read := range []string{"driver.enabled", "gpuTolerationPolicy", "node-feature-discovery"} {
		if strings.Contains(w, read) {
			t.Errorf("warning %q names %s, which is read", w, read)
		}
	}
	if w, err := unreadValues("v26.7.0", map[string]any{"driver": map[string]any{"enabled": false}}); err != nil || w != "" {
		t.Errorf("values the chart reads: warning %q (%v)", w, err)
	}
}
