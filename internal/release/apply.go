package release

import (
	"context"
	"fmt"
	"maps"
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
	// Unchanged: the deployed revision already has this chart (by ChartDigest) and these values, and
	// every object of it exists; nothing written.
	Unchanged Outcome = "unchanged"
	// WouldInstall and WouldUpgrade: dry run.
	WouldInstall Outcome = "would-install"
	WouldUpgrade Outcome = "would-upgrade"
)

// Apply installs a release, or upgrades it when it exists, or does nothing when the deployed revision
// already matches and all its objects exist — so running gpuctl twice with the same inputs makes no
// new Helm revision, and one whose objects someone deleted puts them back. A release
// left pending-install/-upgrade/-rollback by a gpuctl run that no longer holds the install Lease is
// recovered first (see Recovered); one left pending by anyone else is refused with a *BusyError.
//
// Apply never uninstalls a release that is or was deployed: the only revision it ever replaces is a
// pending-install with no revision before it (nothing of it ever ran). A failed or interrupted
// revision after a deployed or superseded one is rolled back to that one or upgraded from it, so the
// release's history and the objects it owns (the ClusterPolicy, the operator) survive.
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
	// RunID names this gpuctl run: the holder identity of gpuctl's install Lease (internal/lock), which
	// the caller holds while Apply runs. Every revision Apply writes is labelled with it (RunLabel), and
	// a pending revision is recovered only when it names another gpuctl run, which therefore no longer
	// holds the Lease (see recover). "": pending revisions are never touched.
	RunID string
}

// Result of Apply.
type Result struct {
	Outcome Outcome  `json:"outcome"`
	Release *Release `json:"release"`
	// Recovered explains what was done about a release left pending by an interrupted run ("" if none).
	Recovered string `json:"recovered,omitempty"`
	// Recreated names the objects of the deployed revision that were gone from the cluster: the chart
	// and values were unchanged, and the upgrade recreated them.
	Recreated []string `json:"recreated,omitempty"`
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
	hist, recovered, err := a.settledHistory(ctx, timeout)
	if err != nil {
		return nil, err
	}
	res := &Result{Recovered: recovered}
	var cur *releasev1.Release
	if len(hist) > 0 {
		cur = hist[len(hist)-1]
	}
	// A failed newest revision (a failed `helm upgrade`/`helm rollback`, or a failed first install) is
	// upgraded: Helm upgrades from the last deployed revision, or from the failed one when none was
	// ever deployed (action.Upgrade in helm.sh/helm/v4 v4.3.1 pkg/action/upgrade.go).
	switch {
	case cur == nil || cur.Info.Status == common.StatusUninstalled:
		return a.install(ctx, res, timeout)
	case cur.Info.Status == common.StatusDeployed && sameChart(cur.Chart, a.Chart) && sameValues(cur.Config, a.Values):
		gone, err := a.Client.missing(cur.Manifest)
		if err != nil {
			return nil, fmt.Errorf("release %s: %w", a.Name, err)
		}
		if len(gone) > 0 {
			res.Recreated = gone
			return a.upgrade(ctx, res, timeout, cur.Version+1)
		}
		res.Outcome = Unchanged
		res.Release = fromHelm(cur)
		return res, nil
	default:
		// The revision Helm writes next: the newest stored one's number plus one, as Helm counts (a
		// Helm write that races this one makes Helm refuse, pkg/action/upgrade.go).
		return a.upgrade(ctx, res, timeout, cur.Version+1)
	}
}

// settledHistory is the release's history once a pending newest revision an earlier gpuctl run left
// is recovered (recovered says what was done) and only the newest deployed revision is deployed. A
// dry run only reads it.
func (a *Apply) settledHistory(ctx context.Context, timeout time.Duration) (hist []*releasev1.Release, recovered string, err error) {
	if hist, err = a.Client.history(a.Name); err != nil {
		return nil, "", err
	}
	if a.DryRun {
		return hist, "", nil
	}
	if len(hist) > 0 && isPending(hist[len(hist)-1].Info.Status) {
		if recovered, err = a.Client.recover(ctx, hist, a.RunID, timeout); err != nil {
			return nil, "", err
		}
		if hist, err = a.Client.history(a.Name); err != nil {
			return nil, "", err
		}
	}
	if err := a.Client.supersedeExtraDeployed(hist); err != nil {
		return nil, "", err
	}
	return hist, recovered, nil
}

// install installs the release where Helm stores none (or its newest revision is uninstalled): its
// first revision.
func (a *Apply) install(ctx context.Context, res *Result, timeout time.Duration) (*Result, error) {
	in := action.NewInstall(a.Client.cfg)
	in.ReleaseName = a.Name
	in.Namespace = a.Client.namespace
	in.SkipCRDs = true // applied by gpuctl first, server-side, and kept up to date (Helm never upgrades crds/)
	in.Timeout = timeout
	in.WaitStrategy = kube.HookOnlyStrategy
	in.Labels = labels(a.RunID, 1)
	maps.DeleteFunc(in.Labels, func(_, v string) bool { return v == "" }) // nothing to drop on a first revision
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

// upgrade writes revision next of the release with the chart and values, taking over the fields of
// the release's objects that other managers hold.
func (a *Apply) upgrade(ctx context.Context, res *Result, timeout time.Duration, next int) (*Result, error) {
	up := action.NewUpgrade(a.Client.cfg)
	up.Namespace = a.Client.namespace
	up.SkipCRDs = true
	up.Timeout = timeout
	up.WaitStrategy = kube.HookOnlyStrategy
	up.MaxHistory = maxHistory
	// The objects are the release's own: fields an older gpuctl (field manager "gpuctl") or another
	// manager (kubectl edit) left on them are taken over, as `helm upgrade --force-conflicts` does;
	// otherwise server-side apply refuses the upgrade with conflicts.
	up.ForceConflicts = true
	// Server-side always, whatever applied the revision before: Helm v3 applies client-side (and stores
	// no apply method), and Helm's default ("auto": as before) would then refuse forcing conflicts.
	// Helm moves the fields a client-side apply left over (pkg/action/upgrade.go
	// upgradeClientSideFieldManager).
	up.ServerSideApply = "true"
	// gpuctl passes the complete set of values every time (profile, facts, files, --set): values of
	// the previous revision must not leak into this one.
	up.ResetValues = true
	up.Labels = labels(a.RunID, next)
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

// sameChart: the stored chart renders the same as ch (ChartDigest), not just the same version.
func sameChart(stored, ch *chart.Chart) bool {
	d := ChartDigest(ch)
	return d != "" && ChartDigest(stored) == d
}

// supersedeExtraDeployed marks every deployed revision but the newest superseded: two runs without
// a lock could leave two revisions deployed, and Helm's upgrade supersedes only the newest.
func (c *Client) supersedeExtraDeployed(hist []*releasev1.Release) error {
	newest := -1
	for i, r := range hist {
		if r.Info.Status == common.StatusDeployed {
			newest = i
		}
	}
	for i, r := range hist {
		if i == newest || r.Info.Status != common.StatusDeployed {
			continue
		}
		r.SetStatus(common.StatusSuperseded, "superseded by gpuctl: a newer revision is deployed")
		if err := c.cfg.Releases.Update(r); err != nil {
			return fmt.Errorf("mark release %s revision %d superseded: %w", r.Name, r.Version, err)
		}
	}
	return nil
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
