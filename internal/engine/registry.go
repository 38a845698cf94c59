package engine

import (
	"context"
	"fmt"

	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/distro"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
)

// addImageLayers adds the layers of --registry and --image-pull-secret to every Helm release of the plan, among the detected
// facts: above the profile and what detection found, below -f and --set, so the user's own image
// values still win and the Plan shows where each value came from.
func addImageLayers(p *plan.Plan, o InstallOptions) error {
	if o.Registry == "" && len(o.ImagePullSecrets) == 0 {
		return nil
	}
	if distro.Get(p.Distribution).OLM {
		p.Warnings = append(p.Warnings, "--registry and --image-pull-secret: not used on OpenShift, where OLM deploys NVIDIA's operator and its images; mirror them with oc-mirror and an ImageDigestMirrorSet, and add the mirror's credentials to the cluster's global pull secret")
		return nil
	}
	for i := range p.Steps {
		r := p.Steps[i].Release
		// The gpu-monitoring chart runs no pods: it has no image to mirror or pull.
		if r == nil || p.Steps[i].Kind != plan.KindRelease || r.Chart == plan.MonitoringRelease {
			continue
		}
		ch, err := render.LoadChart(r.Chart, r.AppVersion)
		if err != nil {
			return fmt.Errorf("release %s: %w", r.Name, err)
		}
		effective := plan.MergeValues(ch.Values, r.BelowUser())
		// Some image defaults of older releases live in the chart's templates, not in its values
		// (operator.initContainer and kataManager up to v25.10, gpu-operator.releaseDefaults in
		// charts/gpu-operator/templates/_helpers.tpl): the rendered ClusterPolicy has them, at the same
		// paths as the values.
		if r.Chart == plan.OperatorRelease {
			spec, err := renderedPolicySpec(ch, r, effective)
			if err != nil {
				return err
			}
			effective = plan.MergeValues(spec, effective)
		}
		if o.Registry != "" {
			if v := plan.RegistryLayer(o.Registry, effective); len(v) > 0 {
				r.AddDetectedLayer(plan.Layer{Source: plan.RegistrySource(o.Registry), Values: v})
			}
		}
		// NVIDIA's chart names pull secrets per image; the other charts once for all their pods.
		if v := plan.PullSecretLayer(o.ImagePullSecrets, effective, r.Chart != plan.OperatorRelease); len(v) > 0 {
			r.AddDetectedLayer(plan.Layer{Source: plan.PullSecretSource(o.ImagePullSecrets), Values: v})
		}
	}
	return nil
}

// renderedPolicySpec renders the operator chart offline with values and returns its ClusterPolicy's spec.
func renderedPolicySpec(ch *chart.Chart, r *plan.Release, values map[string]any) (map[string]any, error) {
	b, err := bundle.Get(r.AppVersion)
	if err != nil {
		return nil, err
	}
	// Rendering is offline and CPU-bound (no cluster is contacted); any Kubernetes version the chart
	// accepts renders the same ClusterPolicy.
	out, err := (&release.Render{Name: r.Name, Namespace: r.Namespace, Chart: ch, Values: values, KubeVersion: "v" + b.KubernetesMinimum + ".0"}).Run(context.Background())
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", r.Name, err)
	}
	objs, err := render.DecodeManifest(out)
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", r.Name, err)
	}
	for _, u := range objs {
		if u.GetKind() == "ClusterPolicy" {
			spec, _ := u.Object["spec"].(map[string]any)
			return spec, nil
		}
	}
	return map[string]any{}, nil
}
