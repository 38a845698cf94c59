package engine

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/distro"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
	"github.com/gpuctl/gpuctl/internal/runner"
	"github.com/gpuctl/gpuctl/internal/step"
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
	// Timeout bounds the run (default DefaultUpgradeTimeout); on a path of more than one hop, each hop.
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
	// Sharing, when given, replaces the recorded --sharing (nil keeps it; ["none"] takes it off).
	Sharing []string
	// MIG, when given, replaces the recorded --mig (nil keeps it; ["none"] takes it off).
	MIG []string
	// DRA, when set, replaces the recorded --dra (nil keeps it).
	DRA *bool
	// Precompiled, when given, replaces the recorded --precompiled ("none" takes it off).
	Precompiled string
	// DryRun plans and previews the upgrade (a Helm dry run of every release against its deployed
	// revision) and returns: nothing is written, not even the lock.
	DryRun bool
	// AcceptValueChanges acknowledges values the target release does not read and defaults that
	// change (the preview lists them); without it such an upgrade is refused before anything is
	// written (the lock included), with a ValueChangesError. The CLI sets it with --accept-value-changes,
	// and without --yes, where the prompt shows them (or the run is refused for want of --yes).
	AcceptValueChanges bool
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
	// Confirm is called once, before the first write, with what each hop of the path will change (one
	// preview for an upgrade within a major or to the next one); false stops the run with
	// ErrNotConfirmed. Nil confirms.
	Confirm func([]*UpgradePreview) bool
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
	Change plan.VersionChange `json:"change"`
	// Notes are what NVIDIA's upgrade guide asks between the two releases, and how gpuctl meets it.
	Notes    []string        `json:"notes,omitempty"`
	Releases []ReleaseChange `json:"releases"`
	// Diffs are the rendered objects that change, the ClusterPolicy first.
	Diffs []render.ObjectDiff `json:"diffs,omitempty"`
	// Values are the keys the user set that the target release does not read and the defaults that
	// change between the two releases (NVIDIA's chart of each, internal/bundle/values_facts.json).
	Values *bundle.ValueChanges `json:"values,omitempty"`
	// Sharing is --sharing's move, where the upgrade has a choice or had one (nil otherwise).
	Sharing *SharingChange `json:"sharing,omitempty"`
	// MIG is --mig's move, where the upgrade has a choice or had one (nil otherwise).
	MIG *MIGChange `json:"mig,omitempty"`
}

// MIGChange is --mig's move: the recorded choice, the new one, the node labels the upgrade sets, and
// the nodes whose mig-parted config changes. MIG manager repartitions those nodes' GPUs, which stops
// the GPU pods on them (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-mig.html).
type MIGChange struct {
	From   []string         `json:"from,omitempty"`
	To     []string         `json:"to,omitempty"`
	Labels *plan.NodeLabels `json:"labels,omitempty"`
	// Repartition are the nodes whose nvidia.com/mig.config the upgrade changes, sorted.
	Repartition []string `json:"repartition,omitempty"`
}

// SharingChange is --sharing's move: the recorded choice, the new one, and the node labels the
// upgrade sets (the ConfigMap and devicePlugin.config changes are in the operator release's diff).
type SharingChange struct {
	From   []string         `json:"from,omitempty"`
	To     []string         `json:"to,omitempty"`
	Labels *plan.NodeLabels `json:"labels,omitempty"`
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
	// Recreate names objects of the deployed revision that are gone from the cluster: the upgrade
	// recreates them.
	Recreate []string `json:"recreate,omitempty"`
}

// Changed reports whether the preview changes anything.
func (p *UpgradePreview) Changed() bool {
	for _, r := range p.Releases {
		if r.Outcome != release.Unchanged {
			return true
		}
	}
	if p.MIG != nil && (!slices.Equal(p.MIG.From, p.MIG.To) || len(p.MIG.Repartition) > 0) {
		return true
	}
	return p.Sharing != nil && !slices.Equal(p.Sharing.From, p.Sharing.To)
}

// UpgradeResult is what Upgrade did.
type UpgradeResult struct {
	// DryRun: the preview of a dry run; nothing was written.
	DryRun bool `json:"dryRun,omitempty"`
	// Path is the operator releases the upgrade goes through, the installed one first and the target
	// last (v25.10.1, v26.3.3, v26.7.0): NVIDIA supports an upgrade within a major or to the next one
	// only (UpgradePath).
	Path []string `json:"path,omitempty"`
	// Hops are the moves of a path of more than one (each its own run of the install pipeline, its own
	// Helm revisions, healthy before the next), in order, as far as the run got. Preview, Install and
	// DriverUpgrades below are then the last hop's, except Preview.Values: the value changes from the
	// installed release to the target (each hop's own are in its preview).
	Hops    []*UpgradeHop   `json:"hops,omitempty"`
	Preview *UpgradePreview `json:"preview,omitempty"`
	Install *InstallResult  `json:"install,omitempty"`
	// DriverUpgrades are the GPU nodes' final nvidia.com/gpu-driver-upgrade-state ("" = none).
	DriverUpgrades map[string]string `json:"driverUpgrades,omitempty"`
}

// UpgradeHop is one hop of an upgrade's path, as a one-hop upgrade reports it.
type UpgradeHop struct {
	From    string          `json:"from"`
	To      string          `json:"to"`
	Preview *UpgradePreview `json:"preview,omitempty"`
	Install *InstallResult  `json:"install,omitempty"`
	// DriverUpgrades are the GPU nodes' nvidia.com/gpu-driver-upgrade-state after the hop ("" = none).
	DriverUpgrades map[string]string `json:"driverUpgrades,omitempty"`
}

// UpgradeResume is what an interrupted upgrade's step tells the user to do; the run's summary names the
// target release (hopError).
const UpgradeResume = "run gpuctl upgrade again: it continues where this run stopped"

// Run upgrades: along the path of hops UpgradePath gives, each one run of the install pipeline and
// its waits (runHop), with every hop's value changes judged and the whole path confirmed once, before
// the first write.
func (u *Upgrade) Run(ctx context.Context) (*UpgradeResult, error) {
	o := u.Options
	if o.Timeout == 0 {
		o.Timeout = DefaultUpgradeTimeout
	}
	sink := event.Or(u.Sink)
	// The new inputs are judged before anything is read from the cluster or written to it (the lock's
	// Lease included); the -f files are read once, here (standard input cannot be read twice).
	b, files, err := u.judgeInputs(ctx, o)
	if err != nil {
		return nil, err
	}
	rec, hops, err := u.installed(ctx, b, o.Force, sink)
	if err != nil {
		return nil, err
	}
	net, err := u.valueChanges(rec, hops, b, files, o, sink)
	if err != nil {
		return nil, err
	}
	if o.DryRun {
		return u.dryRunPath(ctx, rec, hops, files, o, sink, net)
	}
	if changed := hopValueChanges(hops); len(changed) > 0 && !o.AcceptValueChanges {
		e := &ValueChangesError{Changes: net}
		if len(hops) > 1 {
			e.Path, e.Hops = pathOf(hops), changed
		}
		return nil, e
	}
	if len(hops) > 1 {
		return u.runPath(ctx, rec, hops, files, o, sink, net)
	}
	res, err := u.runHop(ctx, rec, hops[0], files, o, sink, func(_ context.Context, pv *UpgradePreview, _ map[string]releaseState) error {
		if u.Confirm != nil && !u.Confirm([]*UpgradePreview{pv}) {
			return ErrNotConfirmed
		}
		return nil
	})
	res.Path = pathOf(hops)
	return res, hopError(err, hops, 0)
}

// runHop is one hop: the install pipeline for h.to with rec's inputs under the lock, h's preview (and
// confirm, when given) before its first write, then the waits until the new release runs on every GPU
// node. An upgrade within a major or to the next one is one hop.
func (u *Upgrade) runHop(ctx context.Context, rec *record.Record, h upgradeHop, files []plan.Layer, o UpgradeOptions, sink event.Sink,
	confirm func(context.Context, *UpgradePreview, map[string]releaseState) error) (*UpgradeResult, error) {
	res := &UpgradeResult{}
	var operandsBefore map[string]string
	ires, err := u.install(rec, h.to.Version, files, o, sink).run(ctx, func(ctx context.Context, p *plan.Plan) error {
		pv, after, err := u.preview(ctx, p, rec, h.to.Version, h.change, nil)
		if err != nil {
			return fmt.Errorf("preview the upgrade: %w", err)
		}
		pv.Values, res.Preview = h.values, pv
		if operandsBefore, err = operandGenerations(ctx, u.Clients, rec.Namespace); err != nil {
			return fmt.Errorf("preview the upgrade: %w", err)
		}
		if confirm != nil {
			return confirm(ctx, pv, after)
		}
		return nil
	})
	res.Install = ires
	if err != nil || res.Preview == nil || !res.Preview.Changed() || len(ires.GPUNodes) == 0 {
		return res, err
	}
	r := &runner.Runner{Sink: sink, Resume: UpgradeResume}
	return res, r.Run(ctx, u.settleSteps(rec, ires.GPUNodes, operandsBefore, res, o.Timeout))
}

// dryRunHop plans hop h as the run would (the install pipeline's dry run, which takes no lock) and
// previews what it would change: against the deployed revisions, or for a hop after the first against
// what the hop before renders (before). It returns what the hop renders, for the next one.
func (u *Upgrade) dryRunHop(ctx context.Context, rec *record.Record, h upgradeHop, files []plan.Layer, o UpgradeOptions, sink event.Sink,
	before map[string]releaseState) (*UpgradeResult, map[string]releaseState, error) {
	inst := u.install(rec, h.to.Version, files, o, sink)
	inst.Options.DryRun = true
	ires, err := inst.Run(ctx)
	res := &UpgradeResult{Install: ires, DryRun: true}
	if err != nil {
		return res, nil, err
	}
	pv, after, err := u.preview(ctx, ires.Plan, rec, h.to.Version, h.change, before)
	if pv != nil {
		pv.Values, res.Preview = h.values, pv
	}
	return res, after, err
}

// judgeInputs reads the operator release asked for, the -f files and --set, then asks whether the
// cluster answers.
func (u *Upgrade) judgeInputs(ctx context.Context, o UpgradeOptions) (bundle.Bundle, []plan.Layer, error) {
	b, err := bundle.Get(o.OperatorVersion)
	if err != nil {
		return b, nil, fmt.Errorf("%w: %w", plan.ErrInput, err)
	}
	files, err := parseValueLayers(InstallOptions{ValuesFiles: o.ValuesFiles})
	if err != nil {
		return b, nil, err
	}
	if _, err := release.ParseSet(o.Set); err != nil {
		return b, nil, fmt.Errorf("%w: %w", plan.ErrInput, err)
	}
	if _, err := plan.ParseSharing(o.Sharing); err != nil {
		return b, nil, err
	}
	if _, err := plan.ParseMIG(o.MIG); err != nil {
		return b, nil, err
	}
	if o.Precompiled != PrecompiledNone {
		if err := plan.CheckPrecompiled(o.Precompiled); err != nil {
			return b, nil, err
		}
	}
	if u.Reach != nil {
		err = u.Reach(ctx)
	}
	return b, files, err
}

// installed reads the install record and the hops from its operator release to target.
func (u *Upgrade) installed(ctx context.Context, target bundle.Bundle, force bool, sink event.Sink) (*record.Record, []upgradeHop, error) {
	rec, err := record.Read(ctx, u.Clients.Kube)
	if err != nil {
		return nil, nil, err
	}
	if rec == nil || rec.Uninstalled {
		// A stack a GitOps engine installed has no record either: name the engine, not "nothing".
		if err := refuseOwned(ctx, u.Clients, installTargets(nil, u.Clients.Namespace), sink); err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("%w: gpuctl upgrade moves a stack gpuctl installed (it reads the install record %s/%s); run gpuctl install", ErrNotInstalled, record.Namespace, record.Name)
	}
	hops, err := upgradeHops(rec, target, force)
	if err != nil {
		return nil, nil, err
	}
	if hops[len(hops)-1].change == plan.VersionDowngrade {
		sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Message: fmt.Sprintf("--force: downgrading the GPU Operator from %s to %s; the CRDs of %s stay", rec.OperatorVersion, target.Version, rec.OperatorVersion)})
	}
	return rec, hops, nil
}

// install is the install pipeline with the recorded inputs and the new ones over them.
func (u *Upgrade) install(rec *record.Record, version string, files []plan.Layer, o UpgradeOptions, sink event.Sink) *Install {
	in := rec.Inputs
	clients := *u.Clients
	clients.Namespace = rec.Namespace
	inst := &Install{Clients: &clients, Sink: sink, Version: u.Version, command: "upgrade", Getenv: u.Getenv, Stdin: u.Stdin}
	inst.Options = InstallOptions{
		Profile: in.Profile, ValueLayers: append(slices.Clone(in.Files), files...),
		Set: append(slices.Clone(in.Set), o.Set...), NoTaint: in.NoTaint, Taint: in.Taint, TolerateExistingTaints: in.TolerateExistingTaints,
		Channel: in.Channel, OperatorVersion: version, Timeout: o.Timeout, WaitForLock: o.WaitForLock, SkipChecks: o.SkipChecks,
		Registry: in.Registry, ImagePullSecrets: slices.Clone(in.ImagePullSecrets), Monitoring: in.Monitoring,
		Sharing: slices.Clone(in.Sharing), MIG: slices.Clone(in.MIG), Precompiled: in.Precompiled,
		AdoptedValues: in.Adopted,
	}
	switch o.Precompiled {
	case "":
	case PrecompiledNone:
		inst.Options.Precompiled = ""
	default:
		inst.Options.Precompiled = o.Precompiled
	}
	if len(o.Sharing) > 0 {
		inst.Options.Sharing = slices.Clone(o.Sharing)
	}
	if len(o.MIG) > 0 {
		inst.Options.MIG = slices.Clone(o.MIG)
	}
	if o.Monitoring != nil {
		inst.Options.Monitoring = *o.Monitoring
	}
	inst.Options.DRA = in.DRA
	if o.DRA != nil {
		inst.Options.DRA = *o.DRA
	}
	if o.Registry != "" {
		inst.Options.Registry = o.Registry
	}
	if len(o.ImagePullSecrets) > 0 {
		inst.Options.ImagePullSecrets = slices.Clone(o.ImagePullSecrets)
	}
	return inst
}

// settleSteps wait, once the releases changed, until the new release runs on every GPU node: its
// controller has re-rendered the operands (a new release only), the operands rolled out and the
// validators passed, and the operator's upgrade controller replaced the driver node by node.
func (u *Upgrade) settleSteps(rec *record.Record, nodes []string, operandsBefore map[string]string, res *UpgradeResult, timeout time.Duration) []runner.Step {
	var steps []runner.Step
	if res.Preview.Change != plan.VersionSame {
		// The driver upgrade states and the operands read "done" until the new controller has acted.
		steps = append(steps, runner.Step{ID: "wait-reconciled", Title: "Wait for the new controller to reconcile the operands",
			Do: func(ctx context.Context, _ func(health.Progress)) (runner.Outcome, error) {
				return u.waitReconciled(ctx, rec.Namespace, operandsBefore)
			}})
	}
	// The driver DaemonSet is updated OnDelete: it has rolled out only once the upgrade controller
	// replaced every driver pod, so the rollout comes first and the upgrade states are read after.
	steps = append(steps, runner.Step{ID: "wait-new-operands", Title: "Wait for the new release's operands and validators",
		Do: func(ctx context.Context, progress func(health.Progress)) (runner.Outcome, error) {
			return u.revalidate(ctx, rec, nodes, timeout, progress)
		}})
	return append(steps, runner.Step{ID: "wait-driver-upgrade", Title: "Wait for the operator's driver upgrades",
		Hint: "kubectl get nodes -L " + health.DriverUpgradeStateLabel + " shows each node's state",
		Do: func(ctx context.Context, progress func(health.Progress)) (runner.Outcome, error) {
			return u.waitDriverUpgrades(ctx, rec.Namespace, nodes, timeout, progress, res)
		}})
}

// waitDriverUpgrades waits until every GPU node's driver upgrade state has settled, and fails
// naming the nodes where it failed.
func (u *Upgrade) waitDriverUpgrades(ctx context.Context, ns string, nodes []string, timeout time.Duration, progress func(health.Progress), res *UpgradeResult) (runner.Outcome, error) {
	w := &health.Waiter{Kube: u.Clients.Kube, Dynamic: u.Clients.Dynamic, Namespace: ns, OnProgress: progress}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	states, err := w.DriverUpgradesSettled(ctx, nodes)
	res.DriverUpgrades = states
	if err != nil {
		return runner.Outcome{}, err
	}
	var failed []string
	for _, n := range nodes {
		if states[n] == health.DriverUpgradeFailed {
			failed = append(failed, n)
		}
	}
	if len(failed) > 0 {
		return runner.Outcome{}, &runner.StepError{Err: fmt.Errorf("the operator's driver upgrade failed on %v", failed),
			Hint: "kubectl -n " + ns + " logs -l app=nvidia-driver-daemonset -c k8s-driver-manager on those nodes"}
	}
	return runner.Outcome{Message: fmt.Sprintf("%d GPU nodes settled", len(nodes))}, nil
}

// revalidate waits, once the new controller has reconciled, until the operands have rolled out (the
// driver's only when the upgrade controller has replaced every driver pod) and
// the validators are Ready on every GPU node: install's waits alone can pass on the old release's
// still-Ready validators.
func (u *Upgrade) revalidate(ctx context.Context, rec *record.Record, nodes []string, timeout time.Duration, progress func(health.Progress)) (runner.Outcome, error) {
	ns := rec.Namespace
	w := &health.Waiter{Kube: u.Clients.Kube, Dynamic: u.Clients.Dynamic, Namespace: ns, OnProgress: progress}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := w.OperandsRolledOut(ctx, ns); err != nil {
		return runner.Outcome{}, err
	}
	validated, err := w.ValidatorsReady(ctx, ns, nodes)
	if err == nil {
		err = w.ClusterPolicyReady(ctx, recordedPolicyName(rec))
	}
	return runner.Outcome{Message: fmt.Sprintf("%d/%d GPU nodes validated by the new release", len(validated), len(nodes))}, err
}

// preview renders every release of the plan (a Helm dry run: nothing is written) and compares it with
// its deployed revision, or, for a release before names, with what the hop before renders (a path's
// later hop, previewed before the first write). It returns what each release is after the hop.
func (u *Upgrade) preview(ctx context.Context, p *plan.Plan, rec *record.Record, to string, change plan.VersionChange,
	before map[string]releaseState) (*UpgradePreview, map[string]releaseState, error) {
	pv := &UpgradePreview{From: rec.OperatorVersion, To: to, Change: change}
	driverEnabled := true
	helm := release.NewClients(u.Clients.Getter)
	after := map[string]releaseState{}
	for _, r := range p.RunningReleases() {
		if v, ok := r.Values["driver"].(map[string]any); ok && r.Name == plan.OperatorRelease && v["enabled"] == false {
			driverEnabled = false
		}
		rc, err := helm.In(p.ReleaseNamespace(r))
		if err != nil {
			return nil, nil, err
		}
		var from *releaseState
		if s, ok := before[r.Name]; ok {
			from = &s
		}
		move, diffs, state, err := u.previewRelease(ctx, rc, r, from)
		if err != nil {
			return nil, nil, err
		}
		after[r.Name] = state
		pv.Releases = append(pv.Releases, move)
		pv.Diffs = append(pv.Diffs, diffs...)
	}
	if change != plan.VersionSame {
		pv.Notes = plan.UpgradeNotes(rec.OperatorVersion, to, driverEnabled)
	}
	if s := p.Step("node-labels"); s != nil {
		pv.Sharing = &SharingChange{From: rec.Inputs.Sharing, To: rec.Inputs.Sharing, Labels: s.Labels}
		if len(u.Options.Sharing) > 0 {
			pv.Sharing.To = recordedSharing(u.Options.Sharing)
		}
	}
	if s := p.Step(plan.MIGStepID); s != nil {
		var err error
		if pv.MIG, err = u.migChange(ctx, rec, s.Labels); err != nil {
			return nil, nil, err
		}
	}
	if distro.Get(p.Distribution).OLM {
		// OLM, not Helm, installs the operator there: the Subscription's diff above is the change, and
		// the ClusterPolicy follows the CSV OLM installs.
		pv.Notes = append(pv.Notes, "OpenShift: OLM installs the new release. gpuctl moves the Subscription to the release's channel, "+
			"approves exactly the InstallPlan of its CSV (Manual approval), waits for that CSV to succeed, then re-applies ClusterPolicy "+
			plan.OpenShiftPolicyName+" from the new CSV's alm-examples with your values over it "+
			"(https://docs.redhat.com/en/documentation/openshift_container_platform/latest/html/operators/administrator-tasks#olm-upgrading-operators)")
		if change == plan.VersionUpgrade {
			pv.Notes = append(pv.Notes, "OpenShift: OLM's channel graph (each CSV's replaces and skipRange) decides the path from "+rec.OperatorVersion+" to "+to+
				"; gpuctl does not go through the majors in between there, as it does where Helm installs the operator")
		}
	}
	return pv, after, nil
}

// migChange is --mig's move for the preview: the recorded and new choices, and the nodes whose
// config label the step changes (read from the cluster now).
func (u *Upgrade) migChange(ctx context.Context, rec *record.Record, labels *plan.NodeLabels) (*MIGChange, error) {
	c := &MIGChange{From: rec.Inputs.MIG, To: rec.Inputs.MIG, Labels: labels}
	if len(u.Options.MIG) > 0 {
		c.To = recordedMIG(u.Options.MIG)
	}
	if labels == nil {
		return c, nil
	}
	nodes, err := u.Clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("read the nodes' MIG configs: %w", err)
	}
	// The same rule as preflight's gpu-work check, which refuses a repartition under GPU pods.
	c.Repartition = plan.MIGRepartition(labels, nodes.Items)
	return c, nil
}

// previewRelease renders release r as the run will apply it (a Helm dry run: nothing is written)
// and compares it with its deployed revision, or with before (what the hop before renders): what Helm
// would do, the objects that change, and the release as the hop leaves it.
func (u *Upgrade) previewRelease(ctx context.Context, rc *release.Client, r *plan.Release, before *releaseState) (ReleaseChange, []render.ObjectDiff, releaseState, error) {
	ch, err := render.LoadChart(r.Chart, r.AppVersion)
	if err != nil {
		return ReleaseChange{}, nil, releaseState{}, err
	}
	move := ReleaseChange{Name: r.Name, ToChart: r.Chart + "-" + r.ChartVersion, ToApp: ch.Metadata.AppVersion}
	last, err := rc.Last(r.Name)
	if err != nil {
		return move, nil, releaseState{}, err
	}
	if last != nil {
		move.FromChart, move.FromApp, move.FromRevison = last.Chart+"-"+last.ChartVersion, last.AppVersion, last.Revision
	}
	values := r.Values
	if r.Chart == plan.OLMChart {
		// The Subscription's channel (and CSV) as the run will resolve them from the catalog, so an
		// unchanged Subscription previews as unchanged.
		if values, err = step.OLMValues(ctx, u.Clients, values); err != nil {
			return move, nil, releaseState{}, err
		}
	}
	dry, err := rc.PreviewApply(ctx, r.Name, ch, values)
	if err != nil {
		return move, nil, releaseState{}, err
	}
	move.Outcome, move.Recreate = dry.Outcome, dry.Missing
	after := releaseState{chart: move.ToChart, app: move.ToApp, revision: dry.Revision, digest: release.ChartDigest(ch), values: values, manifest: dry.Manifest}
	if dry.Outcome == release.Unchanged {
		after.revision, after.manifest = dry.From, dry.Deployed
	}
	old := dry.Deployed
	if before != nil {
		old = before.manifest
		move, after = chainMove(move, before, after)
	}
	if move.Outcome == release.Unchanged {
		return move, nil, after, nil
	}
	diffs, err := render.DiffManifests(r.Name, old, after.manifest)
	return move, diffs, after, err
}

// recordedPolicyName is the name of the ClusterPolicy of a recorded install.
func recordedPolicyName(rec *record.Record) string {
	if distro.Get(rec.Distribution).OLM {
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
func (u *Upgrade) waitReconciled(ctx context.Context, ns string, before map[string]string) (runner.Outcome, error) {
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
		return runner.Outcome{Message: "operand DaemonSets updated"}, nil
	case ctx.Err() != nil:
		return runner.Outcome{}, ctx.Err()
	}
	msg := fmt.Sprintf("no operand DaemonSet changed within %s: the new release renders them the same, or its controller has not run", reconcileWait)
	event.Or(u.Sink).Event(event.Event{Time: time.Now(), Type: event.Warning, Message: msg})
	return runner.Outcome{Message: "no operand DaemonSet changed"}, nil
}
