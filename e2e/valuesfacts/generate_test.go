package valuesfacts

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/e2e/upstream"
)

// TestValuesFactsAreGenerated regenerates internal/bundle/values_facts.json from NVIDIA's sources of
// each release, as `make values-facts` does, and fails on any difference with the committed file. It
// skips when the sources are missing (fails in CI, where GPUCTL_REQUIRE_GPU_OPERATOR_SOURCES is set).
func TestValuesFactsAreGenerated(t *testing.T) {
	tags := Tags()
	for _, tag := range tags {
		upstream.TreeT(t, tag)
	}
	want, err := Generate(t.Context(), tags)
	if err != nil {
		t.Fatal(err)
	}
	root, err := upstream.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, File))
	if err != nil {
		t.Fatalf("%s: %v (run `make values-facts`)", File, err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs from what `make values-facts` generates at line %d:\n  committed: %s\n  generated: %s", File, i+1, g, w)
			}
		}
	}
}
