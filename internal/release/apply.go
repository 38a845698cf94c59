package release

import (
	"context"
	"fmt"
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
	// Unchanged: the deployed revision already has this chart (by ChartDigest) and these values; nothing written.
	Unchanged Outcome = "unchanged"
	// WouldInstall and WouldUpgrade: dry run.
	WouldInstall Outcome = "would-install"
	WouldUpgrade Outcome = "would-upgrade"
)

// Apply installs a release, or upgrades it when it exists, or does nothing when the deployed revision
// already matches — so running gpuctl twice with the same inputs makes no new Helm revision. A release
// left pending-install/-upgrade/-rollback by an interrupted run is recovered first (see Recovered).
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
	// LockedSince is when the caller took gpuctl's install lock (internal/lock). A pending revision is
	// recovered only under the lock (LockedSince set) and only when it was written before then: one
	// written later belongs to a writer that does not take gpuctl's lock (`helm upgrade` in progress)
	// and is left alone with an error. Zero: pending revisions are never touched.
	LockedSince time.Time
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
	hist, err := a.Client.history(a.Name)
	if err != nil {
		return nil, err
	}
	if len(hist) > 0 && isPending(hist[len(hist)-1].Info.Status) && !a.DryRun {
		msg, err := a.Client.recover(ctx, hist, a.LockedSince, timeout)
		if err != nil {
			return nil, err
		}
		res.Recovered = msg
		if hist, err = a.Client.history(a.Name); err != nil {
			return nil, err
		}
	}
	if !a.DryRun {
		if err := a.Client.supersedeExtraDeployed(hist); err != nil {
			return nil, err
		}
	}
	var cur *releasev1.Release
	if len(hist) > 0 {
		cur = hist[len(hist)-1]
	}

	// A failed newest revision (a failed `helm upgrade`/`helm rollback`, or a failed first install) is
	// upgraded: Helm upgrades from the last deployed revision, or from the failed one when none was
	// ever deployed (action.Upgrade in helm.sh/helm/v4 v4.3.1 pkg/action/upgrade.go).
	install := cur == nil || cur.Info.Status == common.StatusUninstalled
	if !install && cur.Info.Status == common.StatusDeployed && sameChart(cur.Chart, a.Chart) && sameValues(cur.Config, a.Values) {
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
	// The objects are the release's own: fields an older gpuctl (field manager "gpuctl") or another
	// manager (kubectl edit) left on them are taken over, as `helm upgrade --force-conflicts` does;
	// otherwise server-side apply refuses the upgrade with conflicts.
	up.ForceConflicts = true
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

// sameChart: the stored chart renders the same as ch (ChartDigest), not just the same version.
func sameChart(stored, ch *chart.Chart) bool {
	d := ChartDigest(ch)
	return d != "" && ChartDigest(stored) == d
}

// recover deals with a release whose newest revision (the last of hist, oldest first) is pending.
// Only under gpuctl's install lock, and only for a revision written before the lock was taken, is it a
// leftover of an interrupted run rather than an operation in progress. Then:
//   - a pending install with no revision before it is uninstalled (the caller installs it again) —
//     the only case in which gpuctl ever uninstalls a release;
//   - otherwise the revision is marked failed and, when an earlier revision was deployed or
//     superseded, the release is rolled back to the newest such revision; with none, the caller
//     upgrades from the failed revision.
func (c *Client) recover(ctx context.Context, hist []*releasev1.Release, lockedSince time.Time, timeout time.Duration) (string, error) {
	rel := hist[len(hist)-1]
	was := rel.Info.Status
	if lockedSince.IsZero() {
		return "", fmt.Errorf("release %s revision %d is %s: another operation may be in progress; gpuctl recovers it only while holding its install lock", rel.Name, rel.Version, was)
	}
	if rel.Info.LastDeployed.After(lockedSince) {
		return "", fmt.Errorf("release %s revision %d became %s at %s, after this run took gpuctl's install lock at %s: another tool (helm?) is changing it; let it finish, then run gpuctl install again",
			rel.Name, rel.Version, was, rel.Info.LastDeployed.UTC().Format(time.RFC3339), lockedSince.UTC().Format(time.RFC3339))
	}
	if was == common.StatusPendingInstall && len(hist) == 1 {
		if err := c.uninstall(ctx, rel.Name, timeout); err != nil {
			return "", fmt.Errorf("release %s was left %s by an interrupted run and could not be removed: %w", rel.Name, was, err)
		}
		return fmt.Sprintf("revision %d was left %s by an interrupted run with no revision before it; removed it and installed again", rel.Version, was), nil
	}
	var good *releasev1.Release
	for _, r := range hist[:len(hist)-1] {
		switch r.Info.Status {
		case common.StatusDeployed:
			good = r
		case common.StatusSuperseded:
			if good == nil || good.Info.Status != common.StatusDeployed {
				good = r
			}
		}
	}
	// Mark the stuck revision failed, so Helm's rollback or upgrade does not refuse with "another
	// operation is in progress".
	rel.SetStatus(common.StatusFailed, "interrupted; marked failed by gpuctl")
	if err := c.cfg.Releases.Update(rel); err != nil {
		return "", fmt.Errorf("mark release %s revision %d failed: %w", rel.Name, rel.Version, err)
	}
	if good == nil {
		return fmt.Sprintf("revision %d was left %s by an interrupted run; marked it failed (no earlier revision was deployed) and upgraded", rel.Version, was), nil
	}
	rb := action.NewRollback(c.cfg)
	rb.Version = good.Version
	rb.Timeout = timeout
	rb.WaitStrategy = kube.HookOnlyStrategy
	rb.MaxHistory = maxHistory
	rb.ForceConflicts = true // the release's own objects, as for an upgrade
	if err := rb.Run(rel.Name); err != nil {
		return "", fmt.Errorf("roll back release %s to revision %d: %w", rel.Name, good.Version, err)
	}
	return fmt.Sprintf("revision %d was left %s by an interrupted run; rolled back to revision %d", rel.Version, was, good.Version), nil
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
