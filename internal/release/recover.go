package release

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	"github.com/gpuctl/gpuctl/internal/detect"
)

// Labels on every revision gpuctl writes (Helm release labels, stored on Helm's storage Secret as
// `helm install --labels` stores them): the gpuctl run that wrote it and the revision it wrote.
// Helm's upgrade keeps the previous revision's labels and its rollback copies the target's
// (helm.sh/helm/v4 v4.3.1 pkg/action/upgrade.go mergeCustomLabels, rollback.go prepareRollback), so
// a revision whose RevisionLabel is not its own number was written by another tool over one of
// gpuctl's, and the run it names did not write it.
const (
	RunLabel      = "gpuctl.io/run"
	RevisionLabel = "gpuctl.io/revision"
)

// errPending is Helm's own words for a release whose newest revision is pending
// (helm.sh/helm/v4 v4.3.1 pkg/action/action.go errPending), so a refusal reads as Helm's would.
const errPending = "another operation (install/upgrade/rollback) is in progress"

// BusyError: the newest revision of a release is pending and gpuctl cannot tell that the operation
// that wrote it is over (plain helm, another tool, or a gpuctl run that still holds the install
// Lease). gpuctl changes nothing of the release; Hint says how to recover it once that operation is
// over.
type BusyError struct {
	Release   string
	Namespace string
	Revision  int
	Status    string
	// Run is the gpuctl run that wrote the revision (its RunLabel), "" when gpuctl did not.
	Run string
	// Recover is the Helm command that recovers the release once its operation is over: a rollback
	// to the newest earlier revision worth going back to, or an uninstall of a first install.
	Recover string
}

func (e *BusyError) Error() string {
	by := "not by gpuctl"
	if e.Run != "" {
		by = "by gpuctl run " + e.Run
	}
	return fmt.Sprintf("release %s revision %d is %s: %s (%s)", e.Release, e.Revision, e.Status, errPending, by)
}

// Hint is what to do: wait for the operation; if it is over (its process is gone), recover it.
func (e *BusyError) Hint() string {
	return fmt.Sprintf("nothing of release %s was changed; let that operation finish, or if it is over (its process is gone) run %s, then gpuctl install again", e.Release, e.Recover)
}

// runLabel is a run identity (internal/lock's host/pid/token) as a Kubernetes label value: each
// character a label value cannot hold becomes ".", and an identity longer than 63 characters keeps
// its end (the random token); "" stays "".
func runLabel(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			b[i] = '.'
		}
	}
	if len(b) > 63 {
		b = b[len(b)-63:]
	}
	return strings.TrimFunc(string(b), func(r rune) bool { return r > 0x7f || !isAlnum(byte(r)) })
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// labels are the release labels of revision rev written by run (see RunLabel). Without a run, the
// empty values make Helm's upgrade drop the labels the previous revision had.
func labels(run string, rev int) map[string]string {
	l := map[string]string{detect.ManagedReleaseLabel: "true", RunLabel: runLabel(run), RevisionLabel: strconv.Itoa(rev)}
	if run == "" {
		l[RevisionLabel] = ""
	}
	return l
}

// rollbackDescription is the description of a rollback gpuctl runs: Helm's rollback copies its
// target's labels, so the description is what names the run on a pending-rollback revision. Helm
// keeps it once the rollback succeeds, so `helm history` says who rolled back.
func rollbackDescription(target int, run string) string {
	return fmt.Sprintf("Rollback to %d by gpuctl run %s", target, runLabel(run))
}

// writtenBy is the label value of the gpuctl run that wrote rel, "" when gpuctl did not write it.
func writtenBy(rel *releasev1.Release) string {
	if rel.Info.Status == common.StatusPendingRollback {
		run, ok := strings.CutPrefix(rel.Info.Description, rollbackDescription(rel.Info.RollbackRevision, ""))
		if ok && run != "" && runLabel(run) == run {
			return run
		}
		return ""
	}
	if rel.Labels[RevisionLabel] != strconv.Itoa(rel.Version) {
		return ""
	}
	return rel.Labels[RunLabel]
}

// recover deals with a release whose newest revision (the last of hist, oldest first) is pending.
// It is a leftover, and recovered, only when it was written by a gpuctl run other than run, which
// holds the install Lease: a gpuctl run writes releases only while it holds the Lease, so one that no
// longer does has ended, or was killed and its Lease expired or was taken over. Anything else is
// refused with a *BusyError: this run's own write, and any revision gpuctl did not write (a `helm
// upgrade --wait` in progress), however long ago it was written. Clocks are never compared. Then:
//   - a pending install with no revision before it is uninstalled (the caller installs it again) —
//     the only case in which gpuctl ever uninstalls a release;
//   - otherwise the revision is marked failed and, when an earlier revision was deployed or
//     superseded, the release is rolled back to the newest such revision; with none, the caller
//     upgrades from the failed revision.
func (c *Client) recover(ctx context.Context, hist []*releasev1.Release, run string, timeout time.Duration) (string, error) {
	rel := hist[len(hist)-1]
	was := rel.Info.Status
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
	if writer := writtenBy(rel); writer == "" || run == "" || writer == runLabel(run) {
		busy := &BusyError{Release: rel.Name, Namespace: rel.Namespace, Revision: rel.Version, Status: string(was), Run: writer}
		switch {
		case len(hist) == 1:
			busy.Recover = fmt.Sprintf("helm uninstall %s -n %s", rel.Name, rel.Namespace)
		case good != nil:
			busy.Recover = fmt.Sprintf("helm rollback %s %d -n %s", rel.Name, good.Version, rel.Namespace)
		default:
			busy.Recover = fmt.Sprintf("helm rollback %s %d -n %s", rel.Name, hist[len(hist)-2].Version, rel.Namespace)
		}
		return "", busy
	}
	if was == common.StatusPendingInstall && len(hist) == 1 {
		if err := c.uninstall(ctx, rel.Name, timeout); err != nil {
			return "", fmt.Errorf("release %s was left %s by an interrupted run and could not be removed: %w", rel.Name, was, err)
		}
		return fmt.Sprintf("revision %d was left %s by an interrupted run with no revision before it; removed it and installed again", rel.Version, was), nil
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
	rb.ForceConflicts = true    // the release's own objects, as for an upgrade
	rb.ServerSideApply = "true" // as for an upgrade, even back to a revision Helm v3 applied client-side
	rb.Description = rollbackDescription(good.Version, run)
	if err := rb.Run(rel.Name); err != nil {
		return "", fmt.Errorf("roll back release %s to revision %d: %w", rel.Name, good.Version, err)
	}
	return fmt.Sprintf("revision %d was left %s by an interrupted run; rolled back to revision %d", rel.Version, was, good.Version), nil
}
