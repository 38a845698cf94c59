package release

import (
	"fmt"

	"helm.sh/helm/v4/pkg/release/common"
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
