package release

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"

	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// ChartDigest is a digest of what Helm renders a chart from: its metadata, templates, default values,
// schema and files, and those of its subcharts. CRDs (crds/) are left out: gpuctl applies them itself
// and Helm never renders them on an upgrade. Modification times are left out too.
//
// Apply compares the digest of the chart stored in the deployed revision with the digest of the chart
// it is given, so a gpuctl whose templates changed upgrades an existing release even when the chart's
// version and the values are the same — and an unchanged chart makes no new revision. Helm stores the
// whole chart in every revision (the release Secret), so no label or annotation is needed, and a
// revision another tool made with another chart (`helm upgrade`) is seen for what it is.
func ChartDigest(ch *chart.Chart) string {
	if ch == nil {
		return ""
	}
	b, err := canonicalChart(ch)
	if err != nil {
		// Values that cannot be encoded cannot be stored by Helm either: no digest, so Apply never
		// calls such a chart unchanged, and Helm reports the real error.
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

type chartFile struct {
	Name string `json:"name"`
	Data []byte `json:"data"`
}

func canonicalChart(ch *chart.Chart) ([]byte, error) {
	var templates, files []chartFile
	for _, f := range ch.Templates {
		if f != nil {
			templates = append(templates, chartFile{f.Name, f.Data})
		}
	}
	for _, f := range ch.Files {
		if f != nil && !strings.HasPrefix(f.Name, "crds/") {
			files = append(files, chartFile{f.Name, f.Data})
		}
	}
	byName := func(fs []chartFile) { sort.Slice(fs, func(i, j int) bool { return fs[i].Name < fs[j].Name }) }
	byName(templates)
	byName(files)
	var deps []string
	for _, d := range ch.Dependencies() {
		deps = append(deps, ChartDigest(d))
	}
	sort.Strings(deps)
	// Values as Helm stores them (JSON): an int read from values.yaml and the float64 it becomes in a
	// stored revision are the same value. encoding/json sorts map keys, so the encoding is canonical.
	values, err := normalize(ch.Values)
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		Metadata     *chart.Metadata `json:"metadata"`
		Templates    []chartFile     `json:"templates"`
		Values       map[string]any  `json:"values"`
		Schema       []byte          `json:"schema"`
		Files        []chartFile     `json:"files"`
		Dependencies []string        `json:"dependencies"`
	}{ch.Metadata, templates, values, ch.Schema, files, deps})
}
