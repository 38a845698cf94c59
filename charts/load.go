package charts

import (
	"fmt"
	"io/fs"
	"path"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// Load reads the named embedded chart (one of Names) into a Helm chart, ready for rendering or
// installing.
func Load(name string) (*chart.Chart, error) {
	return loadFS(FS, name)
}

// loadFS loads the chart in directory dir of fsys, with paths relative to the chart as Helm expects.
func loadFS(fsys fs.FS, dir string) (*chart.Chart, error) {
	var files []*archive.BufferedFile
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		rel := p[len(dir)+1:]
		files = append(files, &archive.BufferedFile{Name: path.Clean(rel), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read chart %s: %w", dir, err)
	}
	c, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	return c, nil
}
