package export

import (
	"github.com/gpuctl/gpuctl/internal/plan"
)

// Flux's APIs: source-controller's HelmRepository and helm-controller's HelmRelease, both GA
// (https://fluxcd.io/flux/components/source/helmrepositories/, https://fluxcd.io/flux/components/helm/helmreleases/).
const (
	fluxSourceAPI = "source.toolkit.fluxcd.io/v1"
	fluxHelmAPI   = "helm.toolkit.fluxcd.io/v2"
)

// Intervals Flux reconciles at: the chart index rarely changes, the releases are checked for drift
// more often.
const (
	fluxSourceInterval  = "1h"
	fluxReleaseInterval = "10m"
)

// flux writes one HelmRepository for gpuctl's charts and a HelmRelease per release, each depending on
// the one before it (gpuctl's order: NFD before the operator), after the plain objects.
func (e *Export) flux(r *Result, p *plan.Plan, releases []*plan.Release) {
	r.Header = []string{
		"gpuctl export --for flux: the GPU stack gpuctl would install (profile " + p.Profile + ", distribution " + p.Distribution + ") into namespace " + p.Namespace + ".",
		"Charts from " + e.ChartRepo + ": " + chartList(releases) + ".",
		"Apply it with a Flux Kustomization over this directory (or kubectl apply -f): the plain objects first, then the HelmRepository,",
		"then the HelmReleases, which Flux installs in order (dependsOn). CRDs come from each chart's crds/ with install.crds and",
		"upgrade.crds CreateReplace: Flux's default (Skip on upgrade) would leave them stale (NVIDIA/gpu-operator#602, #139).",
	}
	repo := map[string]any{"interval": fluxSourceInterval, "url": e.ChartRepo}
	if e.oci() {
		repo["type"] = "oci"
		if e.PlainHTTP {
			// "Insecure allows connecting to a non-TLS HTTP container registry" (fluxcd/source-controller
			// api/v1/helmrepository_types.go@v1.8.0).
			repo["insecure"] = true
		}
	}
	r.Documents = append(r.Documents, Document{File: "helmrepository-" + SourceName,
		Comment: []string{"where Flux pulls gpuctl's charts"},
		Object: map[string]any{"apiVersion": fluxSourceAPI, "kind": "HelmRepository",
			"metadata": map[string]any{"name": SourceName, "namespace": p.Namespace},
			"spec":     repo}})
	var previous *plan.Release
	for _, rel := range releases {
		spec := map[string]any{
			"interval":    fluxReleaseInterval,
			"releaseName": rel.Name,
			"chart": map[string]any{"spec": map[string]any{
				"chart": rel.Chart, "version": rel.ChartVersion,
				"sourceRef": map[string]any{"kind": "HelmRepository", "name": SourceName, "namespace": p.Namespace},
			}},
			"install": map[string]any{"crds": "CreateReplace"},
			"upgrade": map[string]any{"crds": "CreateReplace"},
			"values":  plan.CloneValues(rel.Values),
		}
		if previous != nil {
			spec["dependsOn"] = []any{map[string]any{"name": previous.Name, "namespace": previous.Namespace}}
		}
		r.Documents = append(r.Documents, Document{File: "helmrelease-" + rel.Name,
			Comment:   []string{"Helm release " + rel.Name + ": chart " + rel.Chart + " " + rel.ChartVersion},
			ValuesKey: []string{"spec", "values"}, Layers: layerNames(rel),
			Object: map[string]any{"apiVersion": fluxHelmAPI, "kind": "HelmRelease",
				"metadata": map[string]any{"name": rel.Name, "namespace": rel.Namespace},
				"spec":     spec}})
		previous = rel
	}
}
