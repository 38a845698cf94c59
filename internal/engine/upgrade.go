package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// UpgradeOptions are the choices of `gpuctl upgrade`.
type UpgradeOptions struct {
	// OperatorVersion is the operator release to move to ("" = gpuctl's default release).
	OperatorVersion string
	// ValuesFiles and Set are new inputs, merged over the recorded ones (as `helm upgrade
	// --reset-then-reuse-values` merges new values over the last release's).
	ValuesFiles []string
	Set         []string
	// Force allows a downgrade.
	Force bool
	// Timeout bounds the whole run (default 30m: the operator replaces drivers node by node).
	Timeout time.Duration
	// WaitForLock is how long to wait for another run's install lock.
	WaitForLock time.Duration
	// SkipChecks are preflight check IDs not to run.
	SkipChecks []string
	// Registry and ImagePullSecrets replace the recorded --registry and --image-pull-secret when given.
	Registry         string
	ImagePullSecrets []string
	// Monitoring, when set, replaces the recorded --monitoring (nil keeps it).
	Monitoring *bool
}

// Upgrade moves an installed GPU stack to another operator release, or re-applies it with new
// inputs: the CRDs of the target release first (server-side apply, never narrowing), then the
// releases in install order, then install's waits, then the operator's driver upgrades. It runs the
// install pipeline with the recorded inputs (under the same lock, with the same preflight), so it
// never recreates a release: each changed release gets one new Helm revision, an unchanged one none.
type Upgrade struct {
	Clients *kube.Clients
	Options UpgradeOptions
	Sink    event.Sink
	// Confirm is called with what will change before the first write; false stops the run with
	// ErrNotConfirmed. Nil confirms.
	Confirm func(*UpgradePreview) bool
	// Version is gpuctl's version, for the record.
	Version string
	Stdin   io.Reader
	Getenv  func(string) string
	// Reach, when set, is asked once the new inputs are judged, before the install record is read
	// (as Install.Reach).
	Reach func(context.Context) error
}

// UpgradePreview is what an upgrade will change, shown before it writes.
type UpgradePreview struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Change is upgrade, same (new inputs only) or downgrade (--force).
	Change VersionChange `json:"change"`
	// Notes are what NVIDIA's upgrade guide asks between the two releases, and how gpuctl meets it.
	Notes    []string        `json:"notes,omitempty"`
	Releases []ReleaseChange `json:"releases"`
	// Diffs are the rendered objects that change, the ClusterPolicy first.
	Diffs []render.ObjectDiff `json:"diffs,omitempty"`
}

// ReleaseChange is one release's move.
type ReleaseChange struct {
	Name        string `json:"name"`
	FromChart   string `json:"fromChart,omitempty"`
	ToChart     string `json:"toChart"`
	FromApp     string `json:"fromAppVersion,omitempty"`
	ToApp       string `json:"toAppVersion,omitempty"`
	FromRevison int    `json:"fromRevision,omitempty"`
	// Outcome is what Helm would do: would-install, would-upgrade or unchanged.
	Outcome release.Outcome `json:"outcome"`
}

// Changed reports whether the preview changes anything.
func (p *UpgradePreview) Changed() bool {
	for _, r := range p.Releases {
		if r.Outcome != release.Unchanged {
			return true
		}
	}
	return false
}

// UpgradeResult is what Upgrade did.
type UpgradeResult struct {
	Preview *UpgradePreview `json:"preview,omitempty"`
	Install *InstallResult  `json:"install,omitempty"`
	// DriverUpgrades are the GPU nodes' final nvidia.com/gpu-driver-upgrade-state ("" = none).
	DriverUpgrades map[string]string `json:"driverUpgrades,omitempty"`
}

// Run upgrades.
func (u *Upgrade) Run(ctx context.Context) (*UpgradeResult, error) {
	o := u.Options
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Minute
	}
	sink := event.Or(u.Sink)
	// The new inputs are judged before anything is read from the cluster or written to it (the lock's
	// Lease included); the -f files are read once, here (standard input cannot be read twice).
	b, err := bundle.Get(o.OperatorVersion)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	files, err := parseValueLayers(InstallOptions{ValuesFiles: o.ValuesFiles})
	if err != nil {
		return nil, err
	}
	if _, err := release.ParseSet(o.Set); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	if u.Reach != nil {
		if err := u.Reach(ctx); err != nil {
			return nil, err
		}
	}
	rec, err := record.Read(ctx, u.Clients.Kube)
	if err != nil {
		return nil, err
	}
	if rec == nil || rec.Uninstalled {
		return nil, fmt.Errorf("%w: gpuctl upgrade moves a stack gpuctl installed (it reads the install record %s/%s); run gpuctl install", ErrNotInstalled, record.Namespace, record.Name)
	}
	change, err := CheckVersions(rec.OperatorVersion, b.Version, o.Force)
	if err != nil {
		return nil, err
	}
	if change == VersionDowngrade {
		sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Message: fmt.Sprintf("--force: downgrading the GPU Operator from %s to %s; the CRDs of %s stay", rec.OperatorVersion, b.Version, rec.OperatorVersion)})
	}

	in := rec.Inputs
	clients := *u.Clients
	clients.Namespace = rec.Namespace
	inst := &Install{Clients: &clients, Sink: sink, Version: u.Version, command: "upgrade", Getenv: u.Getenv, Stdin: u.Stdin}
	inst.Options = InstallOptions{
		Profile: in.Profile, ValueLayers: append(slices.Clone(in.Files), files...),
		Set: append(slices.Clone(in.Set), o.Set...), NoTaint: in.NoTaint, Taint: in.Taint, TolerateExistingTaints: in.TolerateExistingTaints,
		Channel: in.Channel, OperatorVersion: b.Version, Timeout: o.Timeout, WaitForLock: o.WaitForLock, SkipChecks: o.SkipChecks,
		Registry: in.Registry, ImagePullSecrets: slices.Clone(in.ImagePullSecrets), Monitoring: in.Monitoring,
	}
	if o.Monitoring != nil {
		inst.Options.Monitoring = *o.Monitoring
	}
	if o.Registry != "" {
		inst.Options.Registry = o.Registry
	}
	if len(o.ImagePullSecrets) > 0 {
		inst.Options.ImagePullSecrets = slices.Clone(o.ImagePullSecrets)
	}
	res := &UpgradeResult{}
	var previewErr error
	var operandsBefore map[string]string
	inst.Confirm = func(p *plan.Plan) bool {
		res.Preview, previewErr = u.preview(ctx, p, rec, b.Version, change)
		if previewErr != nil {
			return false
		}
		if operandsBefore, previewErr = operandGenerations(ctx, u.Clients, rec.Namespace); previewErr != nil {
			return false
		}
		return u.Confirm == nil || u.Confirm(res.Preview)
	}
	ires, err := inst.Run(ctx)
	res.Install = ires
	if previewErr != nil {
		return res, fmt.Errorf("preview the upgrade: %w", previewErr)
	}
	if err != nil {
		return res, err
	}
	// The operator's upgrade controller replaces the driver node by node once the new ClusterPolicy
	// is reconciled; the upgrade is over when every GPU node's state has settled.
	if res.Preview != nil && res.Preview.Changed() && len(ires.GPUNodes) > 0 {
		// The driver upgrade states and the operands read "done" until the new controller has acted:
		// wait until it has re-rendered an operand DaemonSet before judging them.
		if res.Preview.Change != VersionSame {
			if err := u.waitReconciled(ctx, rec.Namespace, operandsBefore, sink); err != nil {
				return res, err
			}
		}
		// The driver DaemonSet is updated OnDelete: it has rolled out only once the upgrade controller
		// replaced every driver pod, so the rollout comes first and the upgrade states are read after.
		if err := u.revalidate(ctx, rec, ires.GPUNodes, o.Timeout, sink); err != nil {
			return res, err
		}
		sink.Event(event.Event{Time: time.Now(), Type: event.StepStarted, Step: "wait-driver-upgrade", Title: "Wait for the operator's driver upgrades"})
		w := &health.Waiter{Kube: u.Clients.Kube, Dynamic: u.Clients.Dynamic, Namespace: rec.Namespace, OnProgress: func(p health.Progress) {
			sink.Event(event.Event{Time: time.Now(), Type: event.StepProgress, Step: "wait-driver-upgrade", Title: "Wait for the operator's driver upgrades", Message: p.Message, Done: p.Done, Total: p.Total})
		}}
		wctx, cancel := context.WithTimeout(ctx, o.Timeout)
		states, werr := w.DriverUpgradesSettled(wctx, ires.GPUNodes)
		cancel()
		res.DriverUpgrades = states
		if werr != nil {
			sink.Event(event.Event{Time: time.Now(), Type: event.StepFailed, Step: "wait-driver-upgrade", Title: "Wait for the operator's driver upgrades", Err: werr.Error(),
				Hint: "kubectl get nodes -L " + health.DriverUpgradeStateLabel + " shows each node's state"})
			return res, werr
		}
		var failed []string
		for _, n := range ires.GPUNodes {
			if states[n] == health.DriverUpgradeFailed {
				failed = append(failed, n)
			}
		}
		msg := fmt.Sprintf("%d GPU nodes settled", len(ires.GPUNodes))
		if len(failed) > 0 {
			err := fmt.Errorf("the operator's driver upgrade failed on %v", failed)
			sink.Event(event.Event{Time: time.Now(), Type: event.StepFailed, Step: "wait-driver-upgrade", Title: "Wait for the operator's driver upgrades", Err: err.Error(),
				Hint: "kubectl -n " + rec.Namespace + " logs -l app=nvidia-driver-daemonset -c k8s-driver-manager on those nodes"})
			return res, err
		}
		sink.Event(event.Event{Time: time.Now(), Type: event.StepSucceeded, Step: "wait-driver-upgrade", Title: "Wait for the operator's driver upgrades", Message: msg})
	}
	return res, nil
}

// revalidate waits, once the new controller has reconciled, until the operands have rolled out (the
// driver's only when the upgrade controller has replaced every driver pod) and
// the validators are Ready on every GPU node: install's waits alone can pass on the old release's
// still-Ready validators.
func (u *Upgrade) revalidate(ctx context.Context, rec *record.Record, nodes []string, timeout time.Duration, sink event.Sink) error {
	ns := rec.Namespace
	const step, title = "wait-new-operands", "Wait for the new release's operands and validators"
	sink.Event(event.Event{Time: time.Now(), Type: event.StepStarted, Step: step, Title: title})
	w := &health.Waiter{Kube: u.Clients.Kube, Dynamic: u.Clients.Dynamic, Namespace: ns, OnProgress: func(p health.Progress) {
		sink.Event(event.Event{Time: time.Now(), Type: event.StepProgress, Step: step, Title: title, Message: p.Message, Done: p.Done, Total: p.Total})
	}}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := w.OperandsRolledOut(ctx, ns)
	var validated []string
	if err == nil {
		validated, err = w.ValidatorsReady(ctx, ns, nodes)
	}
	if err == nil {
		err = w.ClusterPolicyReady(ctx, recordedPolicyName(rec))
	}
	if err != nil {
		ev := event.Event{Time: time.Now(), Type: event.StepFailed, Step: step, Title: title, Err: err.Error()}
		var stuck *health.StuckError
		if errors.As(err, &stuck) {
			ev.Hint, ev.Detail = stuck.Hint, stuck.Report.String()
		}
		sink.Event(ev)
		return err
	}
	sink.Event(event.Event{Time: time.Now(), Type: event.StepSucceeded, Step: step, Title: title, Message: fmt.Sprintf("%d/%d GPU nodes validated by the new release", len(validated), len(nodes))})
	return nil
}

// preview renders every release of the plan (a Helm dry run: nothing is written) and compares it with
// its deployed revision.
func (u *Upgrade) preview(ctx context.Context, p *plan.Plan, rec *record.Record, to string, change VersionChange) (*UpgradePreview, error) {
	pv := &UpgradePreview{From: rec.OperatorVersion, To: to, Change: change}
	driverEnabled := true
	clients := map[string]*release.Client{}
	for _, s := range p.Steps {
		if s.Kind != plan.KindRelease || s.Skip != "" || s.Release == nil {
			continue
		}
		r := s.Release
		if r.Name == plan.OperatorRelease {
			if v, ok := r.Values["driver"].(map[string]any); ok && v["enabled"] == false {
				driverEnabled = false
			}
		}
		ns := p.ReleaseNamespace(r)
		rc, ok := clients[ns]
		if !ok {
			var err error
			if rc, err = release.New(u.Clients.Getter, ns, nil); err != nil {
				return nil, err
			}
			clients[ns] = rc
		}
		ch, err := render.LoadChart(r.Chart, r.AppVersion)
		if err != nil {
			return nil, err
		}
		rc2 := ReleaseChange{Name: r.Name, ToChart: r.Chart + "-" + r.ChartVersion, ToApp: ch.Metadata.AppVersion}
		last, err := rc.Last(r.Name)
		if err != nil {
			return nil, err
		}
		if last != nil {
			rc2.FromChart, rc2.FromApp, rc2.FromRevison = last.Chart+"-"+last.ChartVersion, last.AppVersion, last.Revision
		}
		values := r.Values
		if r.Chart == plan.OLMChart {
			// The Subscription's channel (and CSV) as the run will resolve them from the catalog, so an
			// unchanged Subscription previews as unchanged.
			if values, err = runner.OLMValues(ctx, u.Clients, values); err != nil {
				return nil, err
			}
		}
		dry, err := rc.PreviewApply(ctx, r.Name, ch, values)
		if err != nil {
			return nil, err
		}
		rc2.Outcome = dry.Outcome
		pv.Releases = append(pv.Releases, rc2)
		if dry.Outcome == release.Unchanged {
			continue
		}
		diffs, err := render.DiffManifests(r.Name, dry.Deployed, dry.Manifest)
		if err != nil {
			return nil, err
		}
		pv.Diffs = append(pv.Diffs, diffs...)
	}
	if change != VersionSame {
		pv.Notes = UpgradeNotes(rec.OperatorVersion, to, driverEnabled)
	}
	if p.Distribution == "openshift" {
		// OLM, not Helm, installs the operator there: the Subscription's diff above is the change, and
		// the ClusterPolicy follows the CSV OLM installs.
		pv.Notes = append(pv.Notes, "OpenShift: OLM installs the new release. gpuctl moves the Subscription to the release's channel, "+
			"approves exactly the InstallPlan of its CSV (Manual approval), waits for that CSV to succeed, then re-applies ClusterPolicy "+
			plan.OpenShiftPolicyName+" from the new CSV's alm-examples with your values over it "+
			"(https://docs.redhat.com/en/documentation/openshift_container_platform/latest/html/operators/administrator-tasks#olm-upgrading-operators)")
	}
	return pv, nil
}

// recordedPolicyName is the name of the ClusterPolicy of a recorded install.
func recordedPolicyName(rec *record.Record) string {
	if rec.Distribution == "openshift" {
		return plan.OpenShiftPolicyName
	}
	return plan.ClusterPolicyName
}

// operandGenerations maps each operand DaemonSet in ns to its UID and generation.
func operandGenerations(ctx context.Context, clients *kube.Clients, ns string) (map[string]string, error) {
	dss, err := clients.Kube.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list DaemonSets in %s: %w", ns, err)
	}
	out := map[string]string{}
	for _, d := range dss.Items {
		for _, r := range d.OwnerReferences {
			if strings.HasPrefix(r.APIVersion, "nvidia.com/") && (r.Kind == "ClusterPolicy" || r.Kind == "NVIDIADriver") {
				out[d.Name] = fmt.Sprintf("%s/%d", d.UID, d.Generation)
			}
		}
	}
	return out, nil
}

// reconcileWait bounds how long upgrade waits for the new controller to re-render an operand: a
// release whose operands render the same never changes one.
const reconcileWait = 3 * time.Minute

// waitReconciled waits until an operand DaemonSet differs from before the upgrade (new generation,
// new object, or a new DaemonSet): the new release's controller has reconciled the ClusterPolicy.
func (u *Upgrade) waitReconciled(ctx context.Context, ns string, before map[string]string, sink event.Sink) error {
	const step, title = "wait-reconciled", "Wait for the new controller to reconcile the operands"
	sink.Event(event.Event{Time: time.Now(), Type: event.StepStarted, Step: step, Title: title})
	err := wait.PollUntilContextTimeout(ctx, time.Second, reconcileWait, true, func(ctx context.Context) (bool, error) {
		now, err := operandGenerations(ctx, u.Clients, ns)
		if err != nil {
			return false, err
		}
		for name, gen := range now {
			if before[name] != gen {
				return true, nil
			}
		}
		return false, nil
	})
	switch {
	case err == nil:
		sink.Event(event.Event{Time: time.Now(), Type: event.StepSucceeded, Step: step, Title: title, Message: "operand DaemonSets updated"})
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Step: step, Title: title,
		Message: fmt.Sprintf("no operand DaemonSet changed within %s: the new release renders them the same, or its controller has not run", reconcileWait)})
	return nil
}
