package release

import (
	"context"
	"fmt"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// DeployedManifest returns the manifest of a release's deployed revision ("" when none is deployed):
// what upgrade compares the new rendering with.
func (c *Client) DeployedManifest(name string) (string, error) {
	hist, err := c.history(name)
	if err != nil {
		return "", err
	}
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].Info != nil && hist[i].Info.Status == common.StatusDeployed {
			return hist[i].Manifest, nil
		}
	}
	if len(hist) > 0 {
		return "", fmt.Errorf("release %s has no deployed revision (newest: %s)", name, hist[len(hist)-1].Info.Status)
	}
	return "", nil
}

// Preview is what applying a chart with values to a release would do, without writing anything.
type Preview struct {
	// Outcome is WouldInstall, WouldUpgrade or Unchanged (Apply's own test: the deployed revision's
	// chart content and values).
	Outcome Outcome
	// Deployed is the deployed revision's manifest, Manifest the new rendering ("" when Unchanged).
	Deployed, Manifest string
}

// PreviewApply renders what Apply would write, as `helm upgrade --dry-run` does, before the CRDs of the
// new release exist: OpenAPI validation is off (a new ClusterPolicy field would fail it against the
// installed CRD, which gpuctl updates first), and nothing reaches the cluster but reads.
func (c *Client) PreviewApply(ctx context.Context, name string, ch *chart.Chart, values map[string]any) (*Preview, error) {
	hist, err := c.history(name)
	if err != nil {
		return nil, err
	}
	var deployed *releasev1.Release
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].Info != nil && hist[i].Info.Status == common.StatusDeployed {
			deployed = hist[i]
			break
		}
	}
	if deployed == nil {
		out, err := (&Render{Name: name, Namespace: c.namespace, Chart: ch, Values: values}).Run(ctx)
		if err != nil {
			return nil, err
		}
		return &Preview{Outcome: WouldInstall, Manifest: out}, nil
	}
	if sameChart(deployed.Chart, ch) && sameValues(deployed.Config, values) {
		return &Preview{Outcome: Unchanged, Deployed: deployed.Manifest}, nil
	}
	up := action.NewUpgrade(c.cfg)
	up.Namespace = c.namespace
	up.SkipCRDs = true
	up.ResetValues = true
	up.DryRunStrategy = action.DryRunClient
	up.DisableOpenAPIValidation = true
	r, err := up.RunWithContext(ctx, name, ch, values)
	if err != nil {
		return nil, fmt.Errorf("render the upgrade of %s: %w", name, err)
	}
	rel, err := asV1(r)
	if err != nil {
		return nil, err
	}
	return &Preview{Outcome: WouldUpgrade, Deployed: deployed.Manifest, Manifest: rel.Manifest}, nil
}
