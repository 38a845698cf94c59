package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	helmcommon "helm.sh/helm/v4/pkg/release/common"
	helmrelease "helm.sh/helm/v4/pkg/release/v1"

	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/release"
)

// Plan is the objects the Plan would write (each objects step's, then each release's chart
// rendered with its values) and, for each release, its size in Helm's storage: the release record
// Helm would store (chart, values, manifest without the crds/ files, which the chart carries)
// encoded as Helm encodes it.
func Plan(ctx context.Context, p *plan.Plan, kubeVersion string) ([]*unstructured.Unstructured, []preflight.ReleaseSize, error) {
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
	for _, s := range p.Steps {
		if s.Skip != "" {
			continue
		}
		switch s.Kind {
		case plan.KindObjects:
			for _, o := range s.Objects {
				// The checks only read the objects, so the Plan's maps are shared, not copied.
				add(&unstructured.Unstructured{Object: o})
			}
		case plan.KindRelease:
			if s.Release == nil {
				continue
			}
			ch, err := LoadChart(s.Release.Chart, s.Release.AppVersion)
			if err != nil {
				return out, sizes, err
			}
			manifest, err := (&release.Render{Name: s.Release.Name, Namespace: p.Namespace, Chart: ch, Values: s.Release.Values, KubeVersion: kubeVersion}).Run(ctx)
			if err != nil {
				return out, sizes, err
			}
			size, err := preflight.EncodedSize(&helmrelease.Release{
				Name: s.Release.Name, Namespace: p.Namespace, Chart: ch, Config: s.Release.Values, Manifest: manifest,
				Version: 1, Info: &helmrelease.Info{Status: helmcommon.StatusDeployed, Description: "Install complete"}, ApplyMethod: "ssa",
			})
			if err != nil {
				return out, sizes, fmt.Errorf("encode release %s: %w", s.Release.Name, err)
			}
			sizes = append(sizes, preflight.ReleaseSize{Name: s.Release.Name, Bytes: size})
			for _, crd := range ch.CRDObjects() {
				objs, err := DecodeManifest(string(crd.File.Data))
				if err != nil {
					return out, sizes, fmt.Errorf("%s: %s: %w", s.Release.Name, crd.Filename, err)
				}
				for _, o := range objs {
					add(o)
				}
			}
			objs, err := DecodeManifest(manifest)
			if err != nil {
				return out, sizes, fmt.Errorf("render %s: %w", s.Release.Name, err)
			}
			for _, o := range objs {
				add(o)
			}
		}
	}
	return out, sizes, nil
}

// DecodeManifest splits a multi-document YAML manifest into objects, dropping empty documents.
func DecodeManifest(manifest string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(manifest)), 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
}
