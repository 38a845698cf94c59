package release

import (
	"context"
	"fmt"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// Preview is what applying a chart with values to a release would do, without writing anything.
type Preview struct {
	// Outcome is WouldInstall, WouldUpgrade or Unchanged, decided as Apply decides it: install where
	// the release has no revision or was uninstalled, unchanged where the newest revision is deployed
	// with the same chart content and values and all its objects exist, else upgrade (a failed newest
	// revision too).
	Outcome Outcome
	// Revision is the revision Apply would write (0 when Unchanged); From is the newest stored
	// revision an upgrade starts from, or the unchanged deployed one (0 for an install).
	Revision, From int
	// Deployed is the deployed revision's manifest ("" when none), Manifest the new rendering ("" when
	// Unchanged).
	Deployed, Manifest string
	// Missing names the deployed revision's objects that are gone from the cluster: with the same chart
	// and values, the release is upgraded to recreate them (Apply's Recreated).
	Missing []string
}

// PreviewApply renders what Apply would write, as `helm upgrade --dry-run` does, before the CRDs of the
// new release exist: OpenAPI validation is off (a new ClusterPolicy field would fail it against the
// installed CRD, which gpuctl updates first), and nothing reaches the cluster but reads. An install is
// rendered with the cluster's version and API versions, as Helm's install sees them.
func (c *Client) PreviewApply(ctx context.Context, name string, ch *chart.Chart, values map[string]any) (*Preview, error) {
	hist, err := c.history(name)
	if err != nil {
		return nil, err
	}
	var cur, deployed *releasev1.Release
	if len(hist) > 0 {
		cur = hist[len(hist)-1]
	}
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].Info != nil && hist[i].Info.Status == common.StatusDeployed {
			deployed = hist[i]
			break
		}
	}
	pv := &Preview{}
	if deployed != nil {
		pv.Deployed = deployed.Manifest
	}
	if cur == nil || cur.Info.Status == common.StatusUninstalled {
		kubeVersion, apiVersions, err := c.capabilities()
		if err != nil {
			return nil, err
		}
		out, err := (&Render{Name: name, Namespace: c.namespace, Chart: ch, Values: values, KubeVersion: kubeVersion, APIVersions: apiVersions}).Run(ctx)
		if err != nil {
			return nil, err
		}
		pv.Outcome, pv.Revision, pv.Manifest = WouldInstall, 1, out
		return pv, nil
	}
	if cur.Info.Status == common.StatusDeployed && sameChart(cur.Chart, ch) && sameValues(cur.Config, values) {
		if pv.Missing, err = c.missing(cur.Manifest); err != nil {
			return nil, fmt.Errorf("release %s: %w", name, err)
		}
		if len(pv.Missing) == 0 {
			pv.Outcome, pv.From = Unchanged, cur.Version
			return pv, nil
		}
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
	pv.Outcome, pv.Revision, pv.From, pv.Manifest = WouldUpgrade, cur.Version+1, cur.Version, rel.Manifest
	return pv, nil
}

// capabilities are the cluster's version and API versions, as Helm reads them for a release it
// installs (helm.sh/helm/v4 v4.3.1 pkg/action/action.go getCapabilities).
func (c *Client) capabilities() (string, []string, error) {
	if c.cfg.RESTClientGetter == nil {
		return "", nil, nil // Helm's in-memory test configuration: its default capabilities
	}
	dc, err := c.cfg.RESTClientGetter.ToDiscoveryClient()
	if err != nil {
		return "", nil, fmt.Errorf("discovery client: %w", err)
	}
	dc.Invalidate()
	v, err := dc.ServerVersion()
	if err != nil {
		return "", nil, fmt.Errorf("server version: %w", err)
	}
	set, err := action.GetVersionSet(dc)
	if err != nil {
		return "", nil, err
	}
	return v.GitVersion, set, nil
}
