package step

import (
	"context"
	"fmt"
	"strings"

	helmcommon "helm.sh/helm/v4/pkg/release/common"
	helmrelease "helm.sh/helm/v4/pkg/release/v1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
)

// Render is the objects the Plan would write (each objects step's, then each release's chart
// rendered with its values) and, for each release, its size in Helm's storage: the release record
// Helm would store (chart, values, manifest without the crds/ files, which the chart carries)
// encoded as Helm encodes it.
func Render(ctx context.Context, p *plan.Plan, kubeVersion string) ([]*unstructured.Unstructured, []preflight.ReleaseSize, error) {
	var out []*unstructured.Unstructured
	var sizes []preflight.ReleaseSize
	seen := map[string]bool{}
	add := func(o *unstructured.Unstructured) {
		key := o.GroupVersionKind().GroupKind().String() + "/" + o.GetNamespace() + "/" + o.GetName()
		if !seen[key] {
			seen[key] = true
			out = append(out, o)
		}
	}
	steps, err := running(p)
	if err != nil {
		return nil, nil, err
	}
	for _, sk := range steps {
		r := sk.k.Rendered(sk.s)
		for _, o := range r.Objects {
			// The checks only read the objects, so the Plan's maps are shared, not copied.
			add(&unstructured.Unstructured{Object: o})
		}
		if r.Release == nil {
			continue
		}
		objs, size, err := renderRelease(ctx, p, r.Release, kubeVersion)
		if err != nil {
			return out, sizes, err
		}
		sizes = append(sizes, size)
		for _, o := range objs {
			add(o)
		}
	}
	return out, sizes, nil
}

// renderRelease renders a release as Helm would install it: its chart's CRDs and its manifest as
// objects, and the size of the release record Helm would store.
func renderRelease(ctx context.Context, p *plan.Plan, r *plan.Release, kubeVersion string) ([]*unstructured.Unstructured, preflight.ReleaseSize, error) {
	ch, err := render.LoadChart(r.Chart, r.AppVersion)
	if err != nil {
		return nil, preflight.ReleaseSize{}, err
	}
	manifest, err := (&release.Render{Name: r.Name, Namespace: p.Namespace, Chart: ch, Values: r.Values, KubeVersion: kubeVersion}).Run(ctx)
	if err != nil {
		return nil, preflight.ReleaseSize{}, err
	}
	size, err := preflight.EncodedSize(&helmrelease.Release{
		Name: r.Name, Namespace: p.Namespace, Chart: ch, Config: r.Values, Manifest: manifest,
		Version: 1, Info: &helmrelease.Info{Status: helmcommon.StatusDeployed, Description: "Install complete"}, ApplyMethod: "ssa",
	})
	if err != nil {
		return nil, preflight.ReleaseSize{}, fmt.Errorf("encode release %s: %w", r.Name, err)
	}
	var out []*unstructured.Unstructured
	for _, crd := range ch.CRDObjects() {
		objs, err := render.DecodeManifest(string(crd.File.Data))
		if err != nil {
			return nil, preflight.ReleaseSize{}, fmt.Errorf("%s: %s: %w", r.Name, crd.Filename, err)
		}
		out = append(out, objs...)
	}
	objs, err := render.DecodeManifest(manifest)
	if err != nil {
		return nil, preflight.ReleaseSize{}, fmt.Errorf("render %s: %w", r.Name, err)
	}
	return append(out, objs...), preflight.ReleaseSize{Name: r.Name, Bytes: size}, nil
}

// RenderYAML writes what the plan applies as one YAML stream, as `gpuctl template` prints it: each
// step's objects, then each release rendered by Helm with its CRDs, releases in namespace ns.
func RenderYAML(ctx context.Context, p *plan.Plan, ns, kubeVersion string) (string, error) {
	var b strings.Builder
	steps, err := running(p)
	if err != nil {
		return "", err
	}
	for _, sk := range steps {
		r := sk.k.Rendered(sk.s)
		for _, o := range r.Objects {
			y, err := render.YAMLDoc(o)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "---\n# Source: gpuctl %s\n%s", sk.s.ID, y)
		}
		if r.Release == nil {
			continue
		}
		ch, err := render.LoadChart(r.Release.Chart, r.Release.AppVersion)
		if err != nil {
			return "", err
		}
		out, err := (&release.Render{Name: r.Release.Name, Namespace: ns, Chart: ch, Values: r.Release.Values, KubeVersion: kubeVersion, IncludeCRDs: true}).Run(ctx)
		if err != nil {
			return "", err
		}
		b.WriteString(out)
	}
	return b.String(), nil
}
