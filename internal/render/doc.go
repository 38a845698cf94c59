// Package render turns gpuctl's embedded charts and a Plan into what they would write, without
// writing anything: the charts and their CRDs (LoadChart, ChartCRDs), the objects of a whole Plan and
// each release's size in Helm's storage (Plan), per-object diffs between two manifests
// (DiffManifests), the images a manifest pulls (ManifestImages), and the user's values files
// (ReadValuesFile).
package render
