package render

import (
	"fmt"
	"os"
	"path/filepath"

	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	repo "helm.sh/helm/v4/pkg/repo/v1"

	"github.com/gpuctl/gpuctl/charts"
	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// SavedChart is one chart archive SaveRepository wrote.
type SavedChart struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	File    string `json:"file"`
	// Digest is the archive's sha256, as the repository's index.yaml lists it.
	Digest string `json:"digest"`
}

// SaveRepository writes every embedded chart into dir as a Helm chart repository: one archive per
// chart, the gpu-operator chart once per GPU Operator release of the catalog (its version is the
// release's), and an index.yaml of every archive in dir (earlier versions stay, as in any chart
// repository) with URLs relative to baseURL (or to index.yaml when baseURL is ""), as `helm repo
// index` writes it. An engine that pulls `CHART VERSION` from the repository gets
// the chart gpuctl installs for that release.
func SaveRepository(dir, baseURL string) ([]SavedChart, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	var files []string
	save := func(name, appVersion string) error {
		ch, err := LoadChart(name, appVersion)
		if err != nil {
			return err
		}
		file, err := chartutil.Save(ch, dir)
		if err != nil {
			return fmt.Errorf("save chart %s: %w", name, err)
		}
		files = append(files, file)
		return nil
	}
	for _, name := range append(charts.Names(), charts.Optional()...) {
		if name != plan.OperatorRelease {
			if err := save(name, ""); err != nil {
				return nil, err
			}
			continue
		}
		for _, b := range bundle.List() {
			if err := save(name, b.Version); err != nil {
				return nil, err
			}
		}
	}
	index, err := repo.IndexDirectory(dir, baseURL)
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", dir, err)
	}
	index.SortEntries()
	if err := index.WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		return nil, err
	}
	written := map[string]bool{}
	for _, f := range files {
		written[filepath.Base(f)] = true
	}
	var saved []SavedChart
	for _, name := range append(charts.Names(), charts.Optional()...) {
		for _, v := range index.Entries[name] {
			if len(v.URLs) > 0 && written[filepath.Base(v.URLs[0])] {
				saved = append(saved, SavedChart{Name: name, Version: v.Version, File: filepath.Join(dir, filepath.Base(v.URLs[0])), Digest: v.Digest})
			}
		}
	}
	return saved, nil
}
