package e2e

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/e2e/crdgen"
	"github.com/gpuctl/gpuctl/e2e/upstream"
)

// TestCRDsAreGeneratedFromEachReleaseAPI regenerates the gpu-operator chart's CRDs from each
// release's api/ types, as `make crds` does, and fails on any difference with the committed files, and
// on a committed CRD file no release produces. It needs NVIDIA's sources and builds controller-gen on
// first use.
func TestCRDsAreGeneratedFromEachReleaseAPI(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("regenerates the CRDs with controller-gen")
	}
	releases := crdgen.Releases()
	for _, r := range releases {
		upstream.TreeT(t, r.Tag) // skip (or fail in CI) before building anything when sources are missing
	}
	root, err := crdgen.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	cg, err := crdgen.ControllerGen(t.Context(), &progress)
	if err != nil {
		t.Fatal(err)
	}
	want, err := crdgen.Generate(t.Context(), cg, releases, &progress)
	t.Log(strings.TrimSpace(progress.String()))
	if err != nil {
		t.Fatal(err)
	}
	chartDir := filepath.Join(root, crdgen.ChartDir)
	have, err := crdgen.Existing(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range have {
		if _, ok := want[name]; !ok {
			t.Errorf("%s/%s: no release of the catalog generates it (stale; `make crds` removes it)", crdgen.ChartDir, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		got, err := os.ReadFile(filepath.Join(chartDir, name))
		if err != nil {
			t.Errorf("%s/%s: missing (run `make crds`): %v", crdgen.ChartDir, name, err)
			continue
		}
		if line, ok := firstDifference(got, want[name]); !ok {
			t.Errorf("%s/%s differs from what `make crds` generates: %s", crdgen.ChartDir, name, line)
		}
	}
}

// firstDifference describes the first line where a and b differ; ok when they are equal.
func firstDifference(a, b []byte) (string, bool) {
	if bytes.Equal(a, b) {
		return "", true
	}
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y || i >= len(al) || i >= len(bl) {
			return fmt.Sprintf("line %d is %q, generated: %q", i+1, x, y), false
		}
	}
	return "they differ", false
}
