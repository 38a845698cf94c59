package engine

import (
	"fmt"
	"strings"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/step"
)

// offlineDetection is the cluster a plan is rendered for without one: the profile's distribution and
// --kube-version, and for the render flags that need a cluster's facts the closest assumption
// (offlineNotes says each): with --monitoring, a cluster that serves the Prometheus Operator's API (the
// user asks for it, and a render cannot leave it out the way install does where it is not served);
// with --dra, the Kubernetes --kube-version names or else the newest the operator release is tested
// on. No node is known, so no pool, GPU, kernel or taint either (plan.Options.Offline).
func (t *Template) offlineDetection() *detect.Result {
	o := t.Options
	det := &detect.Result{Distribution: detect.Candidate{Name: o.Profile, Fallback: true}, KubernetesVersion: t.KubeVersion}
	if o.Monitoring {
		det.PrometheusOperator = &detect.Finding{Detected: true,
			Evidence: []detect.Evidence{{Signal: "assumed", Value: "monitoring.coreos.com served", Source: "--monitoring without a cluster"}}}
	}
	if o.DRA && det.KubernetesVersion == "" {
		det.KubernetesVersion = newestTestedKubernetes(o.OperatorVersion)
	}
	return det
}

// newestTestedKubernetes is the newest Kubernetes minor NVIDIA tested the operator release on (the
// upper end of bundle.Bundle.Kubernetes, "1.33 - 1.36"); "" for a release gpuctl does not know, which
// reading the inputs refuses.
func newestTestedKubernetes(operatorVersion string) string {
	b, err := bundle.Get(operatorVersion)
	if err != nil {
		return ""
	}
	_, newest, _ := strings.Cut(b.Kubernetes, "-")
	return strings.TrimSpace(newest)
}

// renderNotes are the warnings a rendered plan adds to the plan's own: what it assumed without a
// cluster, and the node labels an install would set, which no render holds.
func (t *Template) renderNotes(p *plan.Plan) []string {
	notes := t.offlineNotes()
	for _, s := range p.Steps {
		if n := step.LabelNote(&s); n != "" {
			notes = append(notes, n)
		}
	}
	return notes
}

// offlineNotes say, for each render flag given that needs a cluster's facts, what a render without
// one assumed instead (offlineDetection) and what install does with the cluster. None with a cluster.
func (t *Template) offlineNotes() []string {
	if !t.offline() {
		return nil
	}
	o := t.Options
	var notes []string
	if o.Monitoring {
		notes = append(notes, "--monitoring: rendered without a cluster, as for one that serves monitoring.coreos.com (the Prometheus Operator's CRDs, e.g. from kube-prometheus-stack); "+
			"where a cluster does not, install leaves monitoring off with a warning, and the API server refuses this render's ServiceMonitors and PrometheusRule")
	}
	if o.DRA {
		from := "--kube-version"
		if t.KubeVersion == "" {
			from = "the newest GPU Operator " + bundleVersion(o.OperatorVersion) + " is tested on"
		}
		notes = append(notes, fmt.Sprintf("--dra: rendered without a cluster, for Kubernetes %s (%s): install refuses a cluster whose Kubernetes is too old for the GPUCluster or that does not serve %s/v1 (docs/dra.md)",
			t.offlineDetection().KubernetesVersion, from, detect.ResourceGroup))
	}
	if o.Precompiled != "" {
		notes = append(notes, "--precompiled "+o.Precompiled+": rendered without a cluster, so no GPU node's kernel is known: every GPU node gets the driver built on the node (NVIDIADriver default); "+
			"install asks the registry for each GPU node's kernel and gives it the precompiled driver where the image exists")
	}
	if o.TolerateExistingTaints {
		notes = append(notes, "--tolerate-existing-taints: rendered without a cluster, so no GPU node's taints are known and none is tolerated; install tolerates the taints its GPU nodes carry")
	}
	return notes
}

// bundleVersion is the operator release's version, or the version asked for where gpuctl does not
// know it.
func bundleVersion(operatorVersion string) string {
	if b, err := bundle.Get(operatorVersion); err == nil {
		return b.Version
	}
	return operatorVersion
}
