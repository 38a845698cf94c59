package release

import (
	"context"
	"fmt"
	"io"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	"helm.sh/helm/v4/pkg/strvals"
)

// Render renders a chart as `helm template` does, offline: no cluster is contacted, and Capabilities
// come from kubeVersion ("" = Helm's default) and APIVersions (added to Helm's default set, as
// `helm template --api-versions`). CRDs from crds/ come first when includeCRDs.
type Render struct {
	Name, Namespace string
	Chart           *chart.Chart
	Values          map[string]any
	KubeVersion     string
	APIVersions     []string
	IncludeCRDs     bool
}

// Run returns the rendered manifest.
func (r *Render) Run(ctx context.Context) (string, error) {
	cfg := action.NewConfiguration()
	cfg.Releases = storage.Init(driver.NewMemory())
	// Helm's own `helm template` uses this printing client: with a client dry run nothing is sent.
	cfg.KubeClient = &kubefake.PrintingKubeClient{Out: io.Discard}
	caps := *common.DefaultCapabilities
	if r.KubeVersion != "" {
		kv, err := common.ParseKubeVersion(r.KubeVersion)
		if err != nil {
			return "", fmt.Errorf("kube version %q: %w", r.KubeVersion, err)
		}
		caps.KubeVersion = *kv
	}
	cfg.Capabilities = &caps
	in := action.NewInstall(cfg)
	in.DryRunStrategy = action.DryRunClient
	in.ReleaseName = r.Name
	in.Namespace = r.Namespace
	in.Replace = true
	in.IncludeCRDs = r.IncludeCRDs
	in.KubeVersion = &caps.KubeVersion
	in.APIVersions = r.APIVersions
	rel, err := in.RunWithContext(ctx, r.Chart, r.Values)
	if err != nil {
		return "", fmt.Errorf("render %s: %w", r.Name, err)
	}
	v1, err := asV1(rel)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(v1.Manifest) + "\n", nil
}

// ParseSet parses --set expressions (Helm's syntax: a.b=c,d[0]=e) into one map, in order.
func ParseSet(exprs []string) (map[string]any, error) {
	out := map[string]any{}
	for _, e := range exprs {
		if err := strvals.ParseInto(e, out); err != nil {
			return nil, fmt.Errorf("--set %s: %w", e, err)
		}
	}
	return out, nil
}
