package export

import (
	"fmt"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpuctl/gpuctl/internal/distro"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/step"
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
	if distro.Get(p.Distribution).OLM {
		return nil, fmt.Errorf("%w: export --for %s: on OpenShift NVIDIA's GPU operator comes from an OLM Subscription, not a Helm chart; put the Subscription and its ClusterPolicy in Git instead (docs/gitops.md)", plan.ErrUnsupported, e.Engine)
	}
	r := &Result{Engine: e.Engine}
	var releases []*plan.Release
	for i := range p.Steps {
		s := &p.Steps[i]
		k, err := step.For(s.Kind)
		if err != nil {
			return nil, err
		}
		x := k.Exported(s)
		for _, o := range x.Objects {
			r.Documents = append(r.Documents, plainDocument(o.Object, s.ID, o.Comment...))
		}
		r.Notes = append(r.Notes, x.Notes...)
		if x.CRDs {
			if err := e.crds(r, s); err != nil {
				return nil, err
			}
		}
		if x.Release != nil {
			releases = append(releases, x.Release)
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
