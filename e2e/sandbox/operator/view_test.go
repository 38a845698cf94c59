package operator

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuctl/gpuctl/e2e/sandbox/controlplane"
	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
)

// Controller processes of different releases, started at the same time, each see their own release's
// files at /opt/gpu-operator, and the machine's /opt/gpu-operator stays as it was.
func TestEachControllerProcessSeesItsOwnOptGPUOperator(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("private mount namespaces need root; the sandbox then copies files to the shared path")
	}
	hostMarker := filepath.Join(FilesPath, toolchain.ReleaseMarker)
	before, _ := os.ReadFile(hostMarker)
	builds := map[string]toolchain.OperatorBuild{}
	for _, r := range []string{"v26.7.0", "v25.10.1"} {
		root := filepath.Join(t.TempDir(), toolchain.OperatorRootDir)
		if err := os.MkdirAll(filepath.Join(root, "manifests"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, toolchain.ReleaseMarker), []byte(r+" test\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		builds[r] = toolchain.OperatorBuild{Release: r, Root: root}
	}
	view := chooseOperatorView(builds["v26.7.0"])
	if !view.private {
		t.Fatalf("root, but no private view: %s", view.warning)
	}
	sp := controlplane.NewSpawner()
	defer sp.Close()
	var wg sync.WaitGroup
	for r, b := range builds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			logPath := filepath.Join(t.TempDir(), "out.log")
			// The process reads the marker, then stays up for a moment so both run at once.
			bin, args, unshare := view.wrap(b.Root, "/bin/sh", "-c", `cat "$1"; sleep 0.5; cat "$1"`, "read", hostMarker)
			p, err := sp.Start("reader", bin, args, os.Environ(), t.TempDir(), logPath, unshare)
			if err != nil {
				t.Error(err)
				return
			}
			select {
			case <-p.Exited():
			case <-time.After(10 * time.Second):
				p.Stop(time.Second)
			}
			if err := p.Err(); err != nil {
				t.Errorf("%s: %v", r, err)
			}
			out, _ := os.ReadFile(logPath)
			if want := strings.Repeat(r+" test\n", 2); string(out) != want {
				t.Errorf("the %s process saw %q at %s, want %q", r, out, hostMarker, want)
			}
		}()
	}
	wg.Wait()
	if after, _ := os.ReadFile(hostMarker); string(after) != string(before) {
		t.Errorf("the machine's %s changed from %q to %q", hostMarker, before, after)
	}
}
