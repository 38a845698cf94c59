package release

import (
	"fmt"

	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
)

// Values are a release's values as `helm get values` shows them: User are the values given to its
// newest revision (`helm get values`), All those merged over its chart's defaults (`helm get values
// --all`, helm.sh/helm/v4 v4.3.1 pkg/action/get_values.go).
type Values struct {
	Release   string         `json:"release"`
	Namespace string         `json:"namespace"`
	Revision  int            `json:"revision"`
	User      map[string]any `json:"user,omitempty"`
	All       map[string]any `json:"all,omitempty"`
}

// GetValues reads the newest revision's values of release name, as `helm get values [--all]` does;
// nil when there is no such release.
func (c *Client) GetValues(name string) (*Values, error) {
	r, err := c.last(name)
	if err != nil || r == nil {
		return nil, err
	}
	out := &Values{Release: r.Name, Namespace: r.Namespace, Revision: r.Version, User: r.Config}
	if r.Chart == nil {
		return out, nil
	}
	all, err := chartutil.CoalesceValues(r.Chart, r.Config)
	if err != nil {
		return nil, fmt.Errorf("values of release %s revision %d: %w", name, r.Version, err)
	}
	out.All = all
	return out, nil
}
