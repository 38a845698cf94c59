package engine

import (
	"context"
	"fmt"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/distro"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/render"
)

// Images lists every image an install would pull: the images of the workloads in the rendered charts,
// and the operands the operator of the chosen release deploys for the rendered ClusterPolicy. Like
// Template, with a Profile it needs no cluster; without one it detects the cluster.
type Images struct {
	// Clients is needed only when Options.Profile is empty.
	Clients     *kube.Clients
	Namespace   string
	Options     InstallOptions
	KubeVersion string
	// NodeOS are the node OS tags to list OS-specific operand images for ("ubuntu22.04"); empty: the
	// GPU nodes' own when a cluster is detected, DefaultNodeOS otherwise.
	NodeOS []string
}

// Run renders and lists.
func (im *Images) Run(ctx context.Context) (*render.ImageList, error) {
	t := &Template{Clients: im.Clients, Namespace: im.Namespace, Options: im.Options, KubeVersion: im.KubeVersion}
	nodeOS, from := im.NodeOS, "--node-os"
	var gpuNodes []detect.GPUNode
	if im.Options.Profile == "" {
		if im.Clients == nil {
			return nil, fmt.Errorf("without --profile, images detects the cluster: no cluster configured")
		}
		det, err := detect.Run(ctx, detect.From(im.Clients))
		if err != nil {
			return nil, err
		}
		t.Detection = det
		if t.KubeVersion == "" {
			// Render for the cluster's Kubernetes, as install does: the charts' kubeVersion floors
			// refuse Helm's offline default.
			t.KubeVersion = det.KubernetesVersion
		}
		if len(nodeOS) == 0 {
			nodeOS, from = render.NodeOSTags(det.GPUNodes)
		}
		gpuNodes = det.GPUNodes
	}
	if len(nodeOS) == 0 {
		nodeOS, from = render.DefaultNodeOS(), "default (no cluster; choose with --node-os)"
	}
	manifest, p, err := t.Run(ctx)
	if err != nil {
		return nil, err
	}
	// The operator release: the chart's when gpuctl installs it with Helm, the bundle's under OLM.
	b, err := bundle.Get(im.Options.OperatorVersion)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", plan.ErrInput, err)
	}
	version := b.Version
	if s := p.Step("release-" + plan.OperatorRelease); s != nil && s.Release != nil {
		version = s.Release.AppVersion
	}
	list := &render.ImageList{Distribution: p.Distribution, Profile: p.Profile,
		OperatorVersion: version, Registry: im.Options.Registry, NodeOS: nodeOS, NodeOSFrom: from}
	if distro.Get(p.Distribution).OLM {
		// On OpenShift the operator, and the images its CSV names, come from OLM's catalog: the
		// ClusterPolicy is the CSV's alm-example, read at install time.
		list.Notes = append(list.Notes, "OpenShift: NVIDIA's certified operator and its operand images come from OLM (the CSV's relatedImages of gpu-operator-certified "+version+"); mirror them with oc-mirror and an ImageDigestMirrorSet, not with --registry. Only the images gpuctl's own charts render are listed.")
	}
	found, err := render.ManifestImages(manifest, version, nodeOS, gpuNodes)
	if err != nil {
		return nil, err
	}
	list.Images, list.Notes = found.Images, append(list.Notes, found.Notes...)
	list.Notes = append(list.Notes, imageNotes(t, p)...)
	return list, nil
}

// imageNotes say which images of the install with these flags the list leaves out: offline, the
// precompiled drivers of --precompiled auto (no kernel is known); with --dra, the GPUCluster's
// operands, which gpuctl does not derive from a release's manifests as it does the ClusterPolicy's.
func imageNotes(t *Template, p *plan.Plan) []string {
	var notes []string
	if t.offline() && t.Options.Precompiled != "" {
		notes = append(notes, "--precompiled "+t.Options.Precompiled+": without a cluster no GPU node's kernel is known, so the driver built on the node is listed and no precompiled image: list against the cluster (without --profile) for those its kernels get")
	}
	if t.Options.DRA {
		notes = append(notes, "--dra: the images the operator deploys for GPUCluster "+plan.GPUClusterName+" (NVIDIA's DRA driver: draDriver in the operator's values) are not listed")
	}
	return notes
}
