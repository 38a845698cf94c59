package export

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/render"
)

// Argo CD's Application API and the annotations it orders and applies by
// (https://argo-cd.readthedocs.io/en/stable/user-guide/sync-waves/,
// https://argo-cd.readthedocs.io/en/stable/user-guide/sync-options/).
const (
	argoAPI          = "argoproj.io/v1alpha1"
	argoWave         = "argocd.argoproj.io/sync-wave"
	argoSyncOptions  = "argocd.argoproj.io/sync-options"
	argoInCluster    = "https://kubernetes.default.svc"
	argoServerSide   = "ServerSideApply=true"
	argoObjectsWave  = -2
	argoCRDsWave     = -1
	argoReleasesWave = 0
)

// crds: Flux takes each chart's CRDs from its crds/ (CreateReplace), and so does an Argo CD fleet's
// Applications (Argo CD applies crds/ itself, server-side, on every sync). For Argo CD Applications the
// Plan's CRDs are plain manifests at a wave before every Application, server-side applied, and the
// Applications skip their charts' crds/. For RKE2 they are plain manifests before the HelmCharts: Helm
// never upgrades a chart's crds/.
func (e *Export) crds(r *Result, s *plan.Step) error {
	if e.Engine == Flux || e.Fleet {
		return nil
	}
	comment := "applied before the Applications, which skip their charts' crds/"
	if e.Engine == RKE2 {
		comment = "applied as a plain manifest before the HelmCharts: the helm-controller's Helm installs a chart's crds/ only when absent and never upgrades them"
	}
	for _, name := range s.Charts {
		crds, version, err := render.ChartCRDs(name, s.ChartReleases[name])
		if err != nil {
			return err
		}
		for _, crd := range crds {
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
			if err != nil {
				return fmt.Errorf("CRD %s: %w", crd.Name, err)
			}
			delete(obj, "status")
			if md, ok := obj["metadata"].(map[string]any); ok {
				delete(md, "creationTimestamp")
			}
			obj["apiVersion"], obj["kind"] = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
			d := plainDocument(obj, s.ID, "CRD of chart "+name+" "+version+", "+comment)
			if e.Engine == ArgoCD {
				annotate(d.Object, map[string]string{argoWave: strconv.Itoa(argoCRDsWave), argoSyncOptions: argoServerSide})
			}
			r.Documents = append(r.Documents, d)
		}
	}
	return nil
}

// argoCD writes an Application per release, in sync waves in gpuctl's order, after the plain objects
// (the earliest wave) and the CRDs.
func (e *Export) argoCD(r *Result, p *plan.Plan, releases []*plan.Release) {
	ns := e.ArgoCDNamespace
	if ns == "" {
		ns = DefaultArgoCDNamespace
	}
	r.Header = []string{
		"gpuctl export --for argocd: the GPU stack gpuctl would install (profile " + p.Profile + ", distribution " + p.Distribution + ") into namespace " + p.Namespace + ".",
		"Charts from " + e.ChartRepo + ": " + chartList(releases) + ".",
		"Sync it with one Argo CD Application over this directory (app of apps): sync waves apply the plain objects (wave " + strconv.Itoa(argoObjectsWave) + "),",
		"the CRDs (wave " + strconv.Itoa(argoCRDsWave) + ", server-side), then one Application per release (waves " + strconv.Itoa(argoReleasesWave) + "…) with skipCrds and",
		"ServerSideApply. gpuctl's charts carry no Helm hooks, so nothing runs as a PreSync hook (NVIDIA's chart's pre-upgrade CRD Job does).",
		"Argo CD waits for a child Application's health between waves only with the Application health check enabled (docs/gitops.md).",
	}
	if e.oci() {
		r.Header = append(r.Header, e.argoOCINote())
	}
	for i := range r.Documents {
		md, _ := r.Documents[i].Object["metadata"].(map[string]any)
		ann, _ := md["annotations"].(map[string]any)
		if _, ok := ann[argoWave]; !ok {
			annotate(r.Documents[i].Object, map[string]string{argoWave: strconv.Itoa(argoObjectsWave)})
		}
	}
	repoURL := e.argoRepoURL()
	for i, rel := range releases {
		app := map[string]any{
			"apiVersion": argoAPI, "kind": "Application",
			"metadata": map[string]any{"name": rel.Name, "namespace": ns,
				"annotations": map[string]any{argoWave: strconv.Itoa(argoReleasesWave + i)}},
			"spec": map[string]any{
				"project":     "default",
				"destination": map[string]any{"server": argoInCluster, "namespace": rel.Namespace},
				"source": map[string]any{
					"repoURL": repoURL, "chart": rel.Chart, "targetRevision": rel.ChartVersion,
					"helm": map[string]any{"releaseName": rel.Name, "skipCrds": true, "valuesObject": plan.CloneValues(rel.Values)},
				},
				"syncPolicy": map[string]any{
					"automated":   map[string]any{"prune": true, "selfHeal": true},
					"syncOptions": []any{argoServerSide},
				},
			},
		}
		r.Documents = append(r.Documents, Document{File: "application-" + rel.Name,
			Comment:   []string{"Helm release " + rel.Name + ": chart " + rel.Chart + " " + rel.ChartVersion + ", sync wave " + strconv.Itoa(argoReleasesWave+i)},
			ValuesKey: []string{"spec", "source", "helm", "valuesObject"}, Layers: layerNames(rel),
			Object: app})
	}
}

// argoRepoURL is the chart repository as Argo CD names it: an OCI Helm repository without its scheme
// (enableOCI on the repository).
func (e *Export) argoRepoURL() string {
	return strings.TrimPrefix(e.ChartRepo, "oci://")
}

// annotate adds annotations to an object's metadata.
func annotate(obj map[string]any, add map[string]string) {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		md = map[string]any{}
		obj["metadata"] = md
	}
	ann, ok := md["annotations"].(map[string]any)
	if !ok {
		ann = map[string]any{}
		md["annotations"] = ann
	}
	for k, v := range add {
		ann[k] = v
	}
}
