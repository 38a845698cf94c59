package export

import (
	"fmt"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpuctl/gpuctl/internal/plan"
)

// Engine is the GitOps engine the export is for.
type Engine string

// The engines export writes for.
const (
	Flux   Engine = "flux"
	ArgoCD Engine = "argocd"
	RKE2   Engine = "rke2"
	// CAPI is refused: see Validate.
	CAPI Engine = "capi"
)

// Defaults of Export.
const (
	// DefaultArgoCDNamespace is where Argo CD looks for Applications (its install manifests' namespace).
	DefaultArgoCDNamespace = "argocd"
	// SourceName names the Flux HelmRepository every HelmRelease pulls gpuctl's charts from.
	SourceName = "gpuctl-charts"
)

// InputError is a mistake in the export's own options (--for, --chart-repo), in one line.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

// Export writes a Plan's objects for a GitOps engine.
type Export struct {
	Engine Engine
	// ChartRepo is where the engine pulls gpuctl's charts: an http(s) chart repository or an oci://
	// registry path.
	ChartRepo string
	// PlainHTTP: the oci:// registry of ChartRepo speaks HTTP without TLS (a lab registry).
	PlainHTTP bool
	// ArgoCDNamespace holds the Applications ("" = DefaultArgoCDNamespace).
	ArgoCDNamespace string
	// Fleet (Argo CD only) writes an ApplicationSet per release instead of an Application, for every
	// cluster Argo CD manages that ClusterSelector matches.
	Fleet bool
	// ClusterSelector are the labels of the Argo CD cluster Secrets a fleet export selects (matchLabels);
	// empty selects every cluster Argo CD manages.
	ClusterSelector map[string]string
}

// Document is one object of the export, with the comment lines written above it.
type Document struct {
	// File is the object's file name without its number and extension ("helmrelease-gpu-operator").
	File    string
	Comment []string
	Object  map[string]any
	// ValuesKey is the path of the release values in Object ("spec.values"), for the comment naming
	// their layers; empty for objects that are not a release.
	ValuesKey []string
	// Layers name where those values came from, lowest precedence first.
	Layers []string
}

// Result is the export: its header, its documents in the order the engine applies them, and what the
// engine cannot do.
type Result struct {
	Engine    Engine
	Header    []string
	Notes     []string
	Documents []Document
}

// Validate judges the options without a Plan: every mistake is an *InputError.
func (e *Export) Validate() error {
	switch e.Engine {
	case Flux, ArgoCD, RKE2:
	case "":
		return &InputError{"--for is required: flux, argocd or rke2"}
	case CAPI:
		return &InputError{"--for capi: not exported: the HelmChartProxy CRD (sigs.k8s.io/cluster-api-addon-provider-helm) is not available as a Go module to validate an export against; see docs/gitops.md#cluster-api"}
	default:
		return &InputError{fmt.Sprintf("--for %s: must be flux, argocd or rke2", e.Engine)}
	}
	if e.Fleet && e.Engine != ArgoCD {
		return &InputError{fmt.Sprintf("--fleet is for --for argocd (ApplicationSets), not %s", e.Engine)}
	}
	if len(e.ClusterSelector) > 0 && !e.Fleet {
		return &InputError{"--cluster-selector selects the clusters of a fleet: it needs --fleet"}
	}
	for k, v := range e.ClusterSelector {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return &InputError{fmt.Sprintf("--cluster-selector %s=%s: %s is not a label key: %s", k, v, k, strings.Join(errs, "; "))}
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return &InputError{fmt.Sprintf("--cluster-selector %s=%s: %q is not a label value: %s", k, v, v, strings.Join(errs, "; "))}
		}
	}
	if e.ChartRepo == "" {
		return &InputError{"--chart-repo is required: the http(s) chart repository or oci:// registry path the engine pulls gpuctl's charts from"}
	}
	u, err := url.Parse(e.ChartRepo)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "oci") {
		return &InputError{fmt.Sprintf("--chart-repo %s: must be an http(s):// chart repository or an oci:// registry path", e.ChartRepo)}
	}
	if e.PlainHTTP && u.Scheme != "oci" {
		return &InputError{fmt.Sprintf("--plain-http is for an oci:// registry; an http:// chart repository (%s) says so in its URL", e.ChartRepo)}
	}
	return nil
}

// oci: the charts are in an OCI registry.
func (e *Export) oci() bool { return strings.HasPrefix(e.ChartRepo, "oci://") }

// argoOCINote is the header line of an Argo CD export whose charts are in an OCI registry: the
// repository Argo CD needs for it, a Secret gpuctl does not write (Argo CD's declarative setup,
// https://argo-cd.readthedocs.io/en/stable/operator-manual/declarative-setup/#helm;
// insecureOCIForceHttp: argoproj/argo-cd pkg/apis/application/v1alpha1/repository_types.go@v3.5.7).
func (e *Export) argoOCINote() string {
	n := "The charts are in an OCI registry: Argo CD needs a repository for " + strings.TrimPrefix(e.ChartRepo, "oci://") + " with type helm and enableOCI true"
	if e.PlainHTTP {
		n += ", and insecureOCIForceHttp true (the registry speaks plain HTTP)"
	}
	return n + "."
}

// Run exports p. It refuses the OpenShift plan (plan.ErrUnsupported): there NVIDIA's operator is an
// OLM Subscription, not a chart.
func (e *Export) Run(p *plan.Plan) (*Result, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	if p.Distribution == "openshift" {
		return nil, fmt.Errorf("%w: export --for %s: on OpenShift NVIDIA's GPU operator comes from an OLM Subscription, not a Helm chart; put the Subscription and its ClusterPolicy in Git instead (docs/gitops.md)", plan.ErrUnsupported, e.Engine)
	}
	r := &Result{Engine: e.Engine}
	var releases []*plan.Release
	for i := range p.Steps {
		s := &p.Steps[i]
		if s.Kind == plan.KindTaint && s.Skip != "" {
			r.Notes = append(r.Notes, "gpuctl would not taint the GPU nodes here ("+s.Skip+"); where you want the taint, set it in the node pool's configuration or run `gpuctl taint`: a GitOps engine does not change nodes")
		}
		if s.Skip != "" {
			continue
		}
		switch s.Kind {
		case plan.KindObjects:
			for _, o := range s.Objects {
				r.Documents = append(r.Documents, plainDocument(o, s.ID))
			}
		case plan.KindPSP:
			r.Documents = append(r.Documents, plainDocument(plan.PSPBinding(s.Target), s.ID,
				"binds the privileged PodSecurityPolicy on older TKGS; harmless where PodSecurityPolicy is no longer served (Kubernetes 1.25 and newer)"))
		case plan.KindSecrets:
			r.Notes = append(r.Notes, secretNotes(s)...)
		case plan.KindTaint:
			r.Notes = append(r.Notes, taintNote(s.Taint))
		case plan.KindSafety:
			r.Notes = append(r.Notes, "gpuctl's run-time check that the taint strands no workload (and the tolerations it adds to the operator and NFD where every schedulable node is a GPU node) is not part of an export: check with `gpuctl check --pre` before tainting")
		case plan.KindCRDs:
			if err := e.crds(r, s); err != nil {
				return nil, err
			}
		case plan.KindRelease:
			releases = append(releases, s.Release)
		}
	}
	for _, w := range p.Warnings {
		r.Notes = append(r.Notes, "plan warning: "+w)
	}
	switch e.Engine {
	case Flux:
		e.flux(r, p, releases)
	case ArgoCD:
		if e.Fleet {
			e.argoCDFleet(r, p, releases)
		} else {
			e.argoCD(r, p, releases)
		}
	case RKE2:
		if err := e.rke2(r, p, releases); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// plainDocument is one of the plan's objects, written as it is applied.
func plainDocument(o map[string]any, step string, comment ...string) Document {
	md, _ := o["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	kind, _ := o["kind"].(string)
	return Document{File: strings.ToLower(kind) + "-" + name, Object: plan.CloneValues(o),
		Comment: append([]string{"gpuctl plan step " + step}, comment...)}
}

// secretNotes say which Secrets the values name and how to create them: their material never enters
// the export.
func secretNotes(s *plan.Step) []string {
	var out []string
	for _, sec := range s.Secrets {
		how := "kubectl create secret generic " + sec.Name + " -n " + sec.Namespace
		if sec.Type == "kubernetes.io/dockerconfigjson" {
			how = "kubectl create secret docker-registry " + sec.Name + " -n " + sec.Namespace + " --docker-server=" + sec.Server + " --docker-username='$oauthtoken' --docker-password=\"$NGC_API_KEY\""
		} else {
			for _, k := range sec.Keys {
				how += " --from-file=" + k + "=" + k
			}
		}
		out = append(out, fmt.Sprintf("Secret %s/%s (%s, keys %s) is referenced by the values, never written here: create it on each cluster before the operator's release (`%s`), or deliver it with your secrets tooling (SOPS, Sealed Secrets, External Secrets); never commit it",
			sec.Namespace, sec.Name, sec.Type, strings.Join(sec.Keys, ", "), how))
	}
	return out
}

// taintNote: an engine applies objects, it does not taint nodes.
func taintNote(t *plan.Taint) string {
	return fmt.Sprintf("the GPU nodes' taint %s=%s:%s is not exported: a GitOps engine does not change nodes; set it in the node pool's configuration (so new nodes get it), or run `gpuctl taint` once the operator is in", t.Key, t.Value, t.Effect)
}

// layerNames are a release's value layers, lowest precedence first.
func layerNames(rel *plan.Release) []string {
	var out []string
	for _, l := range rel.Layers {
		out = append(out, l.Source)
	}
	return out
}

// chartList names the charts and versions, as the header says them.
func chartList(releases []*plan.Release) string {
	var parts []string
	for _, r := range releases {
		parts = append(parts, r.Chart+" "+r.ChartVersion)
	}
	return strings.Join(parts, ", ")
}
