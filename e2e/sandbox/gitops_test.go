package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An unknown GitOps controller is refused before anything is built or started.
func TestStartRefusesAnUnknownGitOpsController(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster")
	_, err := Start(t.Context(), Options{GitOps: "argo", Dir: dir, CacheDir: filepath.Join(t.TempDir(), "cache")})
	if err == nil || !strings.Contains(err.Error(), `unknown GitOps controller "argo"`) {
		t.Fatalf("Start: %v, want the unknown GitOps controller refused", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the state directory was made (%v)", err)
	}
}
