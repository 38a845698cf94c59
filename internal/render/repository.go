package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

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
// chart (Archives), and an index.yaml of every archive in dir (earlier versions stay, as in any chart
// repository) with URLs relative to baseURL (or to index.yaml when baseURL is ""), as `helm repo
// index` writes it. An engine that pulls `CHART VERSION` from the repository gets the chart gpuctl
// installs for that release, byte for byte the archive `gpuctl charts push` pushes.
func SaveRepository(dir, baseURL string) ([]SavedChart, error) {
	archives, err := Archives()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	written := map[string]bool{}
	for _, a := range archives {
		if err := os.WriteFile(filepath.Join(dir, a.File()), a.Data, 0o644); err != nil {
			return nil, fmt.Errorf("save chart %s: %w", a.Name, err)
		}
		written[a.File()] = true
	}
	index, err := repo.IndexDirectory(dir, baseURL)
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", dir, err)
	}
	index.SortEntries()
	if err := index.WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		return nil, err
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

// Archive is one of gpuctl's charts packaged as `helm package` packages it (a .tgz).
type Archive struct {
	Name    string
	Version string
	Data    []byte
	// Digest is the sha256 of Data, hex: index.yaml's digest, and the chart layer's in an OCI registry.
	Digest string
}

// File is the archive's file name in a chart repository, as Helm names it.
func (a Archive) File() string { return a.Name + "-" + a.Version + ".tgz" }

// archiveEpoch is every file's modification time in an archive (Unix seconds), so that the same
// gpuctl packages the same bytes every time: charts save and charts push publish one digest per chart
// version, whenever and wherever they run (as reproducible builds' SOURCE_DATE_EPOCH=0).
const archiveEpoch = 0

// Archives packages every chart gpuctl publishes: each embedded chart, and the gpu-operator chart once
// per GPU Operator release of the catalog (versioned as the release). The one packaging of charts
// save and charts push.
func Archives() ([]Archive, error) {
	tmp, err := os.MkdirTemp("", "gpuctl-charts-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var out []Archive
	pack := func(name, appVersion string) error {
		ch, err := LoadChart(name, appVersion)
		if err != nil {
			return err
		}
		ch.StampModTimes(time.Unix(archiveEpoch, 0).UTC())
		file, err := chartutil.Save(ch, tmp)
		if err != nil {
			return fmt.Errorf("package chart %s: %w", name, err)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		out = append(out, Archive{Name: ch.Metadata.Name, Version: ch.Metadata.Version, Data: data, Digest: hex.EncodeToString(sum[:])})
		return nil
	}
	for _, name := range append(charts.Names(), charts.Optional()...) {
		if name != plan.OperatorRelease {
			if err := pack(name, ""); err != nil {
				return nil, err
			}
			continue
		}
		for _, b := range bundle.List() {
			if err := pack(name, b.Version); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
