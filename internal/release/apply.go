package release

import (
	"context"
	"fmt"
	"sort"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// Outcome says what Apply did.
type Outcome string

const (
	// Installed: a new release (revision 1, or after an uninstall).
	Installed Outcome = "installed"
	// Upgraded: a new revision with a different chart or values.
	Upgraded Outcome = "upgraded"
	// Unchanged: the deployed revision already has this chart version and these values; nothing written.
	Unchanged Outcome = "unchanged"
	// WouldInstall and WouldUpgrade: dry run.
	WouldInstall Outcome = "would-install"
	WouldUpgrade Outcome = "would-upgrade"
)

// Apply installs a release, or upgrades it when it exists, or does nothing when the deployed revision
// already matches — so running gpuctl twice with the same inputs makes no new Helm revision. A release
// left pending-install/-upgrade/-rollback by an interrupted run is recovered first (see Recovered).
type Apply struct {
	Client *Client
	// Name of the release and the chart to release with these user-supplied values (Helm merges the
	// chart's defaults under them, as `helm install -f` does).
	Name   string
	Chart  *chart.Chart
	Values map[string]any
	// DryRun renders against the cluster's capabilities and writes nothing.
	DryRun bool
	// Timeout bounds Helm's own apply (default: the context's deadline, else 5 minutes). gpuctl does
	// not let Helm wait for workloads; its health checks do.
	Timeout time.Duration
}

// Result of Apply.
type Result struct {
	Outcome Outcome  `json:"outcome"`
	Release *Release `json:"release"`
	// Recovered explains what was done about a release left pending by an interrupted run ("" if none).
	Recovered string `json:"recovered,omitempty"`
	// Manifest is the rendered manifest (dry run and changes).
	Manifest string `json:"-"`
}

// Run applies the release.
func (a *Apply) Run(ctx context.Context) (*Result, error) {
	if a.Chart == nil || a.Chart.Metadata == nil {
		return nil, fmt.Errorf("release %s: no chart", a.Name)
	}
	timeout := a.Timeout
	if timeout == 0 {
		timeout = ctxTimeout(ctx, 5*time.Minute)
	}
	res := &Result{}
	cur, err := a.Client.last(a.Name)
	if err != nil {
		return nil, err
	}
	if cur != nil && isPending(cur.Info.Status) && !a.DryRun {
		msg, err := a.Client.recover(ctx, cur, timeout)
		if err != nil {
			return nil, err
		}
		res.Recovered = msg
		if cur, err = a.Client.last(a.Name); err != nil {
			return nil, err
		}
	}

	install := cur == nil || cur.Info.Status == common.StatusUninstalled
	if cur != nil && cur.Info.Status == common.StatusFailed {
		// A failed first install has no deployed revision to upgrade from: Helm refuses to upgrade it.
		if dep, _ := a.Client.cfg.Releases.Deployed(a.Name); dep == nil {
			if err := a.Client.uninstall(ctx, a.Name, timeout); err != nil {
				return nil, fmt.Errorf("replace failed release %s: %w", a.Name, err)
			}
			res.Recovered = fmt.Sprintf("revision %d had failed with no deployed revision before it; reinstalled", cur.Version)
			install = true
		}
	}
	if !install && cur.Info.Status == common.StatusDeployed && cur.Chart != nil && cur.Chart.Metadata != nil &&
		cur.Chart.Metadata.Name == a.Chart.Metadata.Name && cur.Chart.Metadata.Version == a.Chart.Metadata.Version &&
		sameValues(cur.Config, a.Values) {
		res.Outcome = Unchanged
		res.Release = fromHelm(cur)
		return res, nil
	}

	if install {
		in := action.NewInstall(a.Client.cfg)
		in.ReleaseName = a.Name
		in.Namespace = a.Client.namespace
		in.SkipCRDs = true // applied by gpuctl first, server-side, and kept up to date (Helm never upgrades crds/)
		in.Timeout = timeout
		in.WaitStrategy = kube.HookOnlyStrategy
		in.Labels = map[string]string{ManagedByLabel: "true"}
		if a.DryRun {
			in.DryRunStrategy = action.DryRunServer
		}
		r, err := in.RunWithContext(ctx, a.Chart, a.Values)
		if err != nil {
			return nil, fmt.Errorf("install release %s: %w", a.Name, err)
		}
		rel, err := asV1(r)
		if err != nil {
			return nil, err
		}
		res.Outcome, res.Release, res.Manifest = Installed, fromHelm(rel), rel.Manifest
		if a.DryRun {
			res.Outcome = WouldInstall
		}
		return res, nil
	}

	up := action.NewUpgrade(a.Client.cfg)
	up.Namespace = a.Client.namespace
	up.SkipCRDs = true
	up.Timeout = timeout
	up.WaitStrategy = kube.HookOnlyStrategy
	up.MaxHistory = maxHistory
	// gpuctl passes the complete set of values every time (profile, facts, files, --set): values of
	// the previous revision must not leak into this one.
	up.ResetValues = true
	up.Labels = map[string]string{ManagedByLabel: "true"}
	if a.DryRun {
		up.DryRunStrategy = action.DryRunServer
	}
	r, err := up.RunWithContext(ctx, a.Name, a.Chart, a.Values)
	if err != nil {
		return nil, fmt.Errorf("upgrade release %s: %w", a.Name, err)
	}
	rel, err := asV1(r)
	if err != nil {
		return nil, err
	}
	res.Outcome, res.Release, res.Manifest = Upgraded, fromHelm(rel), rel.Manifest
	if a.DryRun {
		res.Outcome = WouldUpgrade
	}
	return res, nil
}

// recover deals with a release an interrupted run left pending. gpuctl holds its install lock while it
// runs (see the engine), so a pending revision is a leftover, not an operation in progress:
// a pending install with nothing deployed before it is uninstalled (and installed again by the caller);
// a pending upgrade or rollback is rolled back to the last deployed revision.
func (c *Client) recover(ctx context.Context, rel *releasev1.Release, timeout time.Duration) (string, error) {
	was := rel.Info.Status
	dep, _ := c.cfg.Releases.Deployed(rel.Name)
	if dep == nil {
		if err := c.uninstall(ctx, rel.Name, timeout); err != nil {
			return "", fmt.Errorf("release %s was left %s by an interrupted run and could not be removed: %w", rel.Name, was, err)
		}
		return fmt.Sprintf("revision %d was left %s by an interrupted run; removed it and installed again", rel.Version, was), nil
	}
	deployed, err := asV1(dep)
	if err != nil {
		return "", err
	}
	// Mark the stuck revision failed, so Helm's rollback does not refuse with "another operation is in progress".
	rel.SetStatus(common.StatusFailed, "interrupted; marked failed by gpuctl before a rollback")
	if err := c.cfg.Releases.Update(rel); err != nil {
		return "", fmt.Errorf("mark release %s revision %d failed: %w", rel.Name, rel.Version, err)
	}
	rb := action.NewRollback(c.cfg)
	rb.Version = deployed.Version
	rb.Timeout = timeout
	rb.WaitStrategy = kube.HookOnlyStrategy
	rb.MaxHistory = maxHistory
	if err := rb.Run(rel.Name); err != nil {
		return "", fmt.Errorf("roll back release %s to revision %d: %w", rel.Name, deployed.Version, err)
	}
	return fmt.Sprintf("revision %d was left %s by an interrupted run; rolled back to revision %d", rel.Version, was, deployed.Version), nil
}

func (c *Client) uninstall(ctx context.Context, name string, timeout time.Duration) error {
	un := action.NewUninstall(c.cfg)
	un.Timeout = timeout
	un.WaitStrategy = kube.HookOnlyStrategy
	_, err := un.Run(name)
	return err
}

// Uninstall removes a release and its history, as `helm uninstall` does.
func (c *Client) Uninstall(ctx context.Context, name string) error {
	return c.uninstall(ctx, name, ctxTimeout(ctx, 5*time.Minute))
}

func sortByRevision(rs []*Release) {
	sort.Slice(rs, func(i, j int) bool { return rs[i].Revision < rs[j].Revision })
}
