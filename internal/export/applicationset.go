package export

import (
	"sort"
	"strconv"
	"strings"

	"github.com/gpuctl/gpuctl/internal/plan"
)

// Argo CD's ApplicationSet with its cluster generator
// (https://argo-cd.readthedocs.io/en/stable/operator-manual/applicationset/Generators-Cluster/) and
// the Go templates it renders the Application with
// (https://argo-cd.readthedocs.io/en/stable/operator-manual/applicationset/GoTemplate/).
const (
	argoCreateNamespace = "CreateNamespace=true"
	// argoClusterName and argoClusterServer are the cluster generator's parameters: the cluster's
	// name and API server URL as its Argo CD cluster Secret has them.
	argoClusterName   = "{{.name}}"
	argoClusterServer = "{{.server}}"
)

// argoCDFleet writes an ApplicationSet per release: for every cluster Argo CD manages that the cluster
// selector matches, one Application per release with the release's values. The Applications carry
// what each cluster needs: the charts' CRDs (Argo CD applies crds/ itself, server-side, on every
// sync) and the namespace with its Pod Security labels (CreateNamespace with managed metadata).
func (e *Export) argoCDFleet(r *Result, p *plan.Plan, releases []*plan.Release) {
	ns := e.ArgoCDNamespace
	if ns == "" {
		ns = DefaultArgoCDNamespace
	}
	r.Header = e.argoFleetHeader(p, releases)
	if e.oci() {
		r.Header = append(r.Header, e.argoOCINote())
	}
	nsLabels := map[string]any{}
	for i := range r.Documents {
		o := r.Documents[i].Object
		md, _ := o["metadata"].(map[string]any)
		if o["kind"] == "Namespace" && md["name"] == p.Namespace {
			if l, ok := md["labels"].(map[string]any); ok {
				nsLabels = plan.CloneValues(l)
			}
		}
		annotate(o, map[string]string{argoWave: strconv.Itoa(argoObjectsWave)})
	}
	generator := e.argoClusterGenerator()
	for i, rel := range releases {
		r.Documents = append(r.Documents, Document{File: "applicationset-" + rel.Name,
			Comment:   []string{"Helm release " + rel.Name + " on every selected cluster: chart " + rel.Chart + " " + rel.ChartVersion},
			ValuesKey: []string{"spec", "template", "spec", "source", "helm", "valuesObject"}, Layers: layerNames(rel),
			Object: e.applicationSet(rel, ns, argoReleasesWave+i, generator, nsLabels)})
	}
}

// argoFleetHeader is the export's header with --fleet: what is installed, on which clusters, and
// how Argo CD applies it.
func (e *Export) argoFleetHeader(p *plan.Plan, releases []*plan.Release) []string {
	selector := "every cluster Argo CD manages"
	if len(e.ClusterSelector) > 0 {
		var kv []string
		for k, v := range e.ClusterSelector {
			kv = append(kv, k+"="+v)
		}
		sort.Strings(kv)
		selector = "every cluster Argo CD manages whose cluster Secret has the labels " + strings.Join(kv, ",")
	}
	return []string{
		"gpuctl export --for argocd --fleet: the GPU stack gpuctl would install (profile " + p.Profile + ", distribution " + p.Distribution + ") into namespace " + p.Namespace + ",",
		"on " + selector + ".",
		"Charts from " + e.ChartRepo + ": " + chartList(releases) + ".",
		"One ApplicationSet per release (cluster generator, Go templates) makes an Application per cluster and release, named CLUSTER-RELEASE,",
		"with the release's values, its chart's CRDs applied by Argo CD server-side on every sync (not by Helm, so never stale; gpuctl's charts have no",
		"Helm hooks), and the namespace created with its Pod Security labels. Order: ApplicationSets have no sync waves between the Applications",
		"they make, and Argo CD's progressive sync (RollingSync) orders the Applications of one ApplicationSet, not across them: NFD and the",
		"operator sync side by side on each cluster, and the operator deploys its operands only on nodes NFD has labelled.",
		"The plain objects below (before the ApplicationSets) are each cluster's prerequisites, not the Argo CD cluster's: deliver them to every",
		"selected cluster before it is selected (the cluster's bootstrap, or an ApplicationSet with a Git directory source over where you commit them).",
	}
}

// argoClusterGenerator is the ApplicationSets' cluster generator: every cluster Argo CD manages, or
// those whose cluster Secret has the labels of --cluster-selector.
func (e *Export) argoClusterGenerator() map[string]any {
	generator := map[string]any{}
	if len(e.ClusterSelector) > 0 {
		labels := map[string]any{}
		for k, v := range e.ClusterSelector {
			labels[k] = v
		}
		generator["selector"] = map[string]any{"matchLabels": labels}
	}
	return generator
}

// applicationSet is the ApplicationSet in namespace ns, at sync wave wave, that makes release rel's
// Application on every cluster generator yields, creating the release's namespace with nsLabels.
func (e *Export) applicationSet(rel *plan.Release, ns string, wave int, generator, nsLabels map[string]any) map[string]any {
	values, _ := escapeGoTemplate(plan.CloneValues(rel.Values)).(map[string]any)
	syncPolicy := map[string]any{
		"automated":   map[string]any{"prune": true, "selfHeal": true},
		"syncOptions": []any{argoServerSide, argoCreateNamespace},
	}
	if len(nsLabels) > 0 {
		syncPolicy["managedNamespaceMetadata"] = map[string]any{"labels": nsLabels}
	}
	return map[string]any{
		"apiVersion": argoAPI, "kind": "ApplicationSet",
		"metadata": map[string]any{"name": rel.Name, "namespace": ns,
			"annotations": map[string]any{argoWave: strconv.Itoa(wave)}},
		"spec": map[string]any{
			"goTemplate":        true,
			"goTemplateOptions": []any{"missingkey=error"},
			"generators":        []any{map[string]any{"clusters": generator}},
			"template": map[string]any{
				"metadata": map[string]any{"name": argoClusterName + "-" + rel.Name},
				"spec": map[string]any{
					"project":     "default",
					"destination": map[string]any{"server": argoClusterServer, "namespace": rel.Namespace},
					"source": map[string]any{
						"repoURL": e.argoRepoURL(), "chart": rel.Chart, "targetRevision": rel.ChartVersion,
						"helm": map[string]any{"releaseName": rel.Name, "skipCrds": false, "valuesObject": values},
					},
					"syncPolicy": syncPolicy,
				},
			},
		},
	}
}

// escapeGoTemplate writes every "{{" in v's strings and keys as a Go template action that prints it:
// an ApplicationSet with goTemplate renders every string of its template, the values included.
func escapeGoTemplate(v any) any {
	switch t := v.(type) {
	case string:
		return strings.ReplaceAll(t, "{{", `{{"{{"}}`)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[escapeGoTemplate(k).(string)] = escapeGoTemplate(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = escapeGoTemplate(x)
		}
		return out
	default:
		return v
	}
}
