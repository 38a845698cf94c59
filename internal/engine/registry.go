package engine

import (
	"context"
	"fmt"

	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
)

// chartImages are the values r would have without the user's layers: the chart's defaults under
// values, and for the operator's chart the ClusterPolicy it renders, as some image defaults of older
// releases live in its templates, not in its values (operator.initContainer and kataManager up to
// v25.10, gpu-operator.releaseDefaults in charts/gpu-operator/templates/_helpers.tpl): the rendered
// ClusterPolicy has them, at the same paths as the values. The plan's --registry and
// --image-pull-secret layers rewrite them (plan.Input.ChartImages).
func chartImages(r *plan.Release, values map[string]any) (map[string]any, error) {
	ch, err := render.LoadChart(r.Chart, r.AppVersion)
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", r.Name, err)
	}
	effective := plan.MergeValues(ch.Values, values)
	if r.Chart != plan.OperatorRelease {
		return effective, nil
	}
	spec, err := renderedPolicySpec(ch, r, effective)
	if err != nil {
		return nil, err
	}
	return plan.MergeValues(spec, effective), nil
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
