package render

import (
	"os"
	"path/filepath"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	repo "helm.sh/helm/v4/pkg/repo/v1"

	"github.com/gpuctl/gpuctl/charts"
	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/release"
)

// TestSaveRepository: the directory is a chart repository Helm reads (index.yaml), with every
// embedded chart and the gpu-operator chart of every release in the catalog, each archive the chart
// gpuctl installs (same content digest), and an archive already there stays listed.
func TestSaveRepository(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("not a chart"), 0o644); err != nil {
		t.Fatal(err)
	}
	saved, err := SaveRepository(dir, "https://charts.example.com/gpuctl")
	if err != nil {
		t.Fatal(err)
	}
	want := len(charts.Names()) + len(charts.Optional()) - 1 + len(bundle.List())
	if len(saved) != want {
		t.Fatalf("saved %d charts, want %d: %+v", len(saved), want, saved)
	}
	index, err := repo.LoadIndexFile(filepath.Join(dir, "index.yaml"))
	if err != nil {
		t.Fatalf("index.yaml: %v", err)
	}
	for _, s := range saved {
		v, err := index.Get(s.Name, s.Version)
		if err != nil {
			t.Errorf("index.yaml lacks %s %s: %v", s.Name, s.Version, err)
			continue
		}
		if v.Digest != s.Digest || v.URLs[0] != "https://charts.example.com/gpuctl/"+filepath.Base(s.File) {
			t.Errorf("%s %s: index lists digest %s at %v, saved %s at %s", s.Name, s.Version, v.Digest, v.URLs, s.Digest, s.File)
		}
		archived, err := loader.Load(s.File)
		if err != nil {
			t.Fatalf("load %s: %v", s.File, err)
		}
		appVersion := ""
		if s.Name == plan.OperatorRelease {
			appVersion = "v" + s.Version
		}
		embedded, err := LoadChart(s.Name, appVersion)
		if err != nil {
			t.Fatal(err)
		}
		if release.ChartDigest(archived) != release.ChartDigest(embedded) {
			t.Errorf("%s: the archive is not the chart gpuctl installs for %s", s.File, s.Version)
		}
	}

	// A second save into the same repository adds nothing and keeps the index whole.
	again, err := SaveRepository(dir, "https://charts.example.com/gpuctl")
	if err != nil || len(again) != want {
		t.Errorf("second save: %d charts, %v", len(again), err)
	}
}

// TestArchivesAreReproducible: the same gpuctl packages the same bytes each time, so charts save and
// charts push publish one digest per chart version; charts save writes exactly those archives.
func TestArchivesAreReproducible(t *testing.T) {
	first, err := Archives()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Archives()
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != len(again) || len(first) == 0 {
		t.Fatalf("%d archives, then %d", len(first), len(again))
	}
	byFile := map[string]string{}
	for i, a := range first {
		if a.Digest != again[i].Digest {
			t.Errorf("%s: digest %s, then %s", a.File(), a.Digest, again[i].Digest)
		}
		byFile[a.File()] = a.Digest
	}
	saved, err := SaveRepository(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range saved {
		if byFile[filepath.Base(s.File)] != s.Digest {
			t.Errorf("charts save wrote %s with digest %s, Archives packages %s", s.File, s.Digest, byFile[filepath.Base(s.File)])
		}
	}
}
