package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/lock"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/profile"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
	"github.com/gpuctl/gpuctl/internal/runner"
	"github.com/gpuctl/gpuctl/internal/step"
)

// InstallOptions are the choices of `gpuctl install` (flags, config file, or the wizard).
type InstallOptions struct {
	// Profile forces a values profile ("" = from the detected distribution).
	Profile string
	// ValuesFiles are -f files, lowest precedence first; Set are --set expressions.
	ValuesFiles []string
	Set         []string
	NoTaint     bool
	// Taint taints the GPU nodes even where gpuctl would not by default (plan.Options.Taint).
	Taint bool
	// DryRun builds and returns the Plan without changing anything.
	DryRun  bool
	Timeout time.Duration
	// Licensing names the NVIDIA AI Enterprise inputs (files, standard input, an environment variable).
	Licensing plan.Licensing
	// OperatorVersion selects an operator release from the bundle catalog ("" = the charts' own).
	OperatorVersion string
	// SkipChecks are preflight check IDs not to run.
	SkipChecks []string
	// Channel is the OLM channel of the GPU operator on OpenShift ("" = the package's default).
	Channel string
	// TolerateExistingTaints adds tolerations for the GPU nodes' own taints that the NFD worker and
	// the operands do not tolerate (otherwise preflight refuses such nodes).
	TolerateExistingTaints bool
	// Monitoring turns on the operator's ServiceMonitors and installs the gpu-monitoring chart (the
	// Grafana dashboard and the PrometheusRule) where the cluster serves monitoring.coreos.com.
	Monitoring bool
	// Sharing are the --sharing values (plan.ParseSharing): GPU sharing for the whole cluster or per
	// node pool; ["none"] takes it off.
	Sharing []string
	// MIG are the --mig values (plan.ParseMIG): the MIG strategy and each pool's mig-parted config;
	// ["none"] takes gpuctl's labels off.
	MIG []string
	// DRA installs the operator's DRA stack (the GPUCluster) instead of the ClusterPolicy (plan.Options.DRA).
	DRA bool
	// Precompiled is --precompiled: "auto" gives each GPU node's kernel the precompiled driver where
	// the registry has its image, the compiled one elsewhere (plan.Options.Precompiled).
	Precompiled string
	// WaitForLock is how long to wait for another run's install lock (0: fail at once with lock.ErrLocked).
	WaitForLock time.Duration
	// Registry is the --registry mirror every image is pulled from ("" = the images' own registries).
	Registry string
	// ImagePullSecrets name the Secrets (in the install namespace) every pod pulls its images with.
	ImagePullSecrets []string
	// ValueLayers are values files already read (upgrade reuses the recorded ones), below ValuesFiles.
	ValueLayers []plan.Layer
	// Adopt takes over a GPU operator Helm release of gpuctl's name that gpuctl did not install,
	// keeping its values as a layer under -f and --set; without it such a release is refused.
	Adopt bool
	// AdoptedValues are the values of a release an earlier install adopted (upgrade passes the
	// recorded layer on): layered where the adopting install layered them.
	AdoptedValues *plan.Layer
	// renderOnly: the plan is rendered (template, export), never run (plan.Options.Render).
	renderOnly bool
	// offline: rendered without a cluster (template, export, images with --profile; plan.Options.Offline).
	offline bool
}

// Install takes a cluster from "GPU nodes joined" to "GPUs validated": detect → plan → execute.
type Install struct {
	Clients *kube.Clients
	Options InstallOptions
	// Sink receives progress events (nil: discarded).
	Sink event.Sink
	// Confirm, if set, is called with the Plan before anything changes; returning false stops the
	// run with ErrNotConfirmed (the wizard shows the plan this way).
	Confirm func(*plan.Plan) bool
	// Stdin and Getenv supply secret inputs given as "-" or as an environment variable's name.
	Stdin  io.Reader
	Getenv func(string) string
	// Reach, when set, is asked once the inputs are judged and before anything else reaches the
	// cluster: the CLI's check that the API server answers (kube.Clients.Reach), so an input mistake
	// is refused as one even when the cluster is down.
	Reach func(context.Context) error
	// Version is gpuctl's version, for the install record.
	Version string
	// tags is the run's registry client: each repository's tag list is read once (--precompiled
	// auto's lookup, then preflight's check).
	tags *tagCache
	// command names the verb in the install record (install, or upgrade when Upgrade runs it).
	command string
	// files are the values files as read, for the record.
	files []plan.Layer
}

// ErrNotConfirmed is returned when Confirm declined the Plan.
var ErrNotConfirmed = errors.New("the plan was not confirmed")

// InstallResult is what Install did.
type InstallResult struct {
	Detection *detect.Result `json:"detection"`
	Plan      *plan.Plan     `json:"plan"`
	// Steps are the outcomes, in order (empty for a dry run).
	Steps []runner.StepResult `json:"steps,omitempty"`
	// GPUNodes are the GPU nodes gpuctl validated.
	GPUNodes []string `json:"gpuNodes,omitempty"`
	// Changed is false when the run changed nothing in the cluster.
	Changed bool `json:"changed"`
	// Releases are the Helm releases after the run.
	Releases []*release.Release `json:"releases,omitempty"`
	// Preflight is the report of the checks run before the first write.
	Preflight *preflight.Report `json:"preflight,omitempty"`
	// Interrupted says how far an interrupted run got (nil when it was not interrupted).
	Interrupted *runner.InterruptedError `json:"interrupted,omitempty"`
	// TaintedUnlisted are the nodes the run tainted that the plan did not name: GPU nodes NFD labelled
	// during the run, tainted by the plan's rule (a dry run's Writes.NodeRule).
	TaintedUnlisted []string `json:"taintedUnlisted,omitempty"`
}

// Run detects, plans, and (unless DryRun) executes the Plan. The context bounds everything; its
// cancellation (Ctrl-C) stops the run between API calls.
func (i *Install) Run(ctx context.Context) (*InstallResult, error) {
	return i.run(ctx, nil)
}

// run is Run with a look at the plan once preflight passed and before Confirm and the first write
// (upgrade's preview): a look that fails stops the run with nothing written.
func (i *Install) run(ctx context.Context, look func(context.Context, *plan.Plan) error) (res *InstallResult, err error) {
	defer func() { res, err = beforeFirstWrite(ctx, res, err) }()
	o := i.Options
	if o.Timeout == 0 {
		o.Timeout = plan.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	sink := event.Or(i.Sink)
	// Every input is read and judged first, with nothing written (the lock's Lease neither): a values
	// file that does not parse or an unknown operator release changes nothing.
	in, err := i.readInputs(o)
	if err == nil && i.Reach != nil {
		err = i.Reach(ctx)
	}
	if err != nil {
		return &InstallResult{}, err
	}
	ctx, lk, lockErr, err := i.lock(ctx, o, sink)
	if err != nil {
		return &InstallResult{}, err
	}
	if lk != nil {
		defer lk.Release(ctx)
	}
	res, p, secrets, err := i.prepare(ctx, o, in, sink, lockErr)
	if err != nil || o.DryRun {
		return res, err
	}
	if look != nil {
		if err := look(ctx, p); err != nil {
			return res, err
		}
	}
	if i.Confirm != nil && !i.Confirm(p) {
		return res, ErrNotConfirmed
	}
	taintedBefore, err := gpuctlTainted(ctx, i.Clients.Kube)
	if err != nil {
		return res, err
	}
	out, err := (&step.Install{Clients: i.Clients, Plan: p, Sink: sink, Secrets: secrets, Lock: lk,
		Inputs: recordInputs(o, i.files, adoptedLayer(in, p)), Version: i.Version, Command: i.verb()}).Run(ctx)
	res.TaintedUnlisted = taintedUnlisted(ctx, i.Clients.Kube, p, taintedBefore, sink)
	if ierr := (*runner.InterruptedError)(nil); errors.As(err, &ierr) {
		res.Interrupted = ierr
	}
	res.Steps, res.GPUNodes, res.Changed, res.Releases = out.Steps, out.GPUNodes, out.Changed, out.Releases
	return res, err
}

// beforeFirstWrite turns an interrupt before the runner started (the lock wait, detection,
// preflight) into an InterruptedError that says nothing was changed.
func beforeFirstWrite(ctx context.Context, res *InstallResult, err error) (*InstallResult, error) {
	if err == nil || !errors.Is(err, context.Canceled) || errors.As(err, new(*runner.InterruptedError)) || !errors.Is(context.Cause(ctx), context.Canceled) {
		return res, err
	}
	ie := &runner.InterruptedError{BeforeFirstWrite: true}
	if res != nil {
		res.Interrupted = ie
	}
	return res, ie
}

// lock takes gpuctl's install lock (internal/lock): one writer at a time. It is taken before
// detection, not just before the first write: detection, the plan and preflight must not judge a
// cluster another run is halfway through changing (its new ClusterPolicy is not "another tool's").
// A dry run takes none. No permission to take it (lockErr) is reported later, with preflight's
// other permissions.
func (i *Install) lock(ctx context.Context, o InstallOptions, sink event.Sink) (_ context.Context, lk *runner.Lock, lockErr, err error) {
	if o.DryRun {
		return ctx, nil, nil, nil
	}
	ctx, lk, lockErr = runner.TakeLock(ctx, i.Clients, o.WaitForLock, sink)
	if lockErr != nil && !apierrors.IsForbidden(lockErr) {
		return ctx, nil, nil, lockErr
	}
	return ctx, lk, lockErr, nil
}

// prepare detects, plans and runs preflight: everything judged before the first write. A failed
// check, a plan that cannot be built (another tool's operator is installed), a missing secret
// input or a lock this run may not take stops the run with nothing changed. A dry run ends after the
// plan.
func (i *Install) prepare(ctx context.Context, o InstallOptions, in *installInputs, sink event.Sink, lockErr error) (*InstallResult, *plan.Plan, []map[string]any, error) {
	det, err := detect.Run(ctx, detect.From(i.Clients))
	if err != nil {
		return nil, nil, nil, err
	}
	res := &InstallResult{Detection: det}
	if err := i.readAdoption(ctx, o, det, in); err != nil {
		return res, nil, nil, err
	}
	p, planErr := i.planWith(ctx, det, o, in)
	if errors.Is(planErr, plan.ErrUnsupported) || errors.Is(planErr, plan.ErrInput) {
		return res, nil, nil, planErr // unsupported clusters keep their own exit code; input mistakes are usage errors
	}
	res.Plan = p
	if p != nil {
		for _, w := range p.Warnings {
			sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Message: w})
		}
	}
	// A release or ClusterPolicy a GitOps engine manages is refused first, the dry run's plan too: the
	// change belongs in the engine's object.
	if err := refuseOwned(ctx, i.Clients, installTargets(p, i.Clients.Namespace), sink); err != nil {
		return res, nil, nil, err
	}
	if o.DryRun && planErr == nil {
		return res, p, nil, i.dryRun(ctx, o, det, p, sink)
	}
	rep, err := installPreflight(ctx, i.Clients, o, o.SkipChecks, det, p, planErr, sink, i.registry())
	res.Preflight = &rep
	if err != nil {
		return res, nil, nil, err
	}
	// Secret inputs are read now: a missing or empty one must fail before the first write.
	secrets, err := i.secretMaterial(p)
	if err != nil {
		sink.Event(event.Event{Time: time.Now(), Type: event.StepFailed, Step: preflightStep, Title: preflightTitle, Err: err.Error(),
			Hint: "nothing was changed; provide the NVIDIA AI Enterprise inputs and run gpuctl install again"})
		return res, nil, nil, fmt.Errorf("%w: %w", preflight.ErrFailed, err)
	}
	if lockErr != nil {
		sink.Event(event.Event{Time: time.Now(), Type: event.StepFailed, Step: preflightStep, Title: preflightTitle, Err: lockErr.Error(),
			Hint: "nothing was changed; gpuctl needs permission to create and update Leases in " + lock.DefaultNamespace})
		return res, nil, nil, fmt.Errorf("%w: no permission to take gpuctl's install lock: %w", preflight.ErrFailed, lockErr)
	}
	return res, p, secrets, nil
}

// dryRun lists every write of p's run, and says where the run would stop on its own writes.
func (i *Install) dryRun(ctx context.Context, o InstallOptions, det *detect.Result, p *plan.Plan, sink event.Sink) error {
	var err error
	if p.Writes, err = step.Writes(ctx, i.Clients, p); err != nil {
		return err
	}
	for _, w := range dryRunRefusals(ctx, i.Clients, o.SkipChecks, det, p) {
		sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Message: w})
		p.Warnings = append(p.Warnings, w)
	}
	return nil
}

// buildPlan reads the inputs and plans for det (check --pre and template: they take no lock).
func (i *Install) buildPlan(ctx context.Context, det *detect.Result, o InstallOptions) (*plan.Plan, error) {
	in, err := i.readInputs(o)
	if err != nil {
		return nil, err
	}
	return i.planWith(ctx, det, o, in)
}

// readInputs is readInputs, keeping the values files as read for the install record.
func (i *Install) readInputs(o InstallOptions) (*installInputs, error) {
	in, err := readInputs(o)
	if err != nil {
		return nil, err
	}
	i.files = in.files
	return in, nil
}

// planWith builds the Plan for det from inputs already read. With --precompiled auto it plans twice:
// the first plan names the driver image, whose registry is then asked for the GPU nodes' kernels
// (within ctx), and the second plans with the answer.
func (i *Install) planWith(ctx context.Context, det *detect.Result, o InstallOptions, in *installInputs) (*plan.Plan, error) {
	p, err := i.planFacts(det, o, in, nil)
	if err != nil || o.Precompiled == "" {
		return p, err
	}
	facts, err := i.precompiledFacts(ctx, det, p)
	if err != nil {
		return nil, err
	}
	return i.planFacts(det, o, in, facts)
}

// planFacts builds the Plan for det with the registry's precompiled facts, if asked.
func (i *Install) planFacts(det *detect.Result, o InstallOptions, in *installInputs, facts *plan.PrecompiledFacts) (*plan.Plan, error) {
	var bv *plan.BundleValues
	if b := in.bundle; !b.Default {
		// The charts' defaults are the default bundle's; another bundle pins its images above them.
		bv = &plan.BundleValues{Version: b.Version, Operator: b.Values(), NFD: b.NFDValues()}
	}
	p, err := plan.Build(plan.Input{
		Detection:   det,
		Profile:     profile.Get,
		Charts:      in.charts,
		Bundle:      bv,
		Precompiled: facts,
		Adopt:       in.adopt,
		ChartImages: chartImages,
		Options: plan.Options{
			Adopt: o.Adopt, AdoptedValues: in.adopted, Render: o.renderOnly, Offline: o.offline,
			Profile: o.Profile, Files: in.files, Set: in.set, Namespace: i.Clients.Namespace,
			NoTaint: o.NoTaint, Taint: o.Taint, Timeout: o.Timeout, Licensing: o.Licensing, Channel: o.Channel,
			TolerateExistingTaints: o.TolerateExistingTaints, Monitoring: o.Monitoring, Sharing: slices.Clone(o.Sharing), MIG: slices.Clone(o.MIG), DRA: o.DRA,
			Precompiled: o.Precompiled, Registry: o.Registry, ImagePullSecrets: slices.Clone(o.ImagePullSecrets),
		},
	})
	if err != nil {
		return nil, err
	}
	if i.command != "upgrade" {
		w, err := unreadValues(in.bundle.Version, userOperatorValues(o, in))
		if err != nil {
			return nil, err
		}
		if w != "" {
			p.Warnings = append(p.Warnings, w)
		}
	}
	return p, nil
}

// recordInputs are the user's inputs as the record keeps them, with the values of a release gpuctl
// adopted.
func recordInputs(o InstallOptions, files []plan.Layer, adopted *plan.Layer) record.Inputs {
	return record.Inputs{Profile: o.Profile, Files: files, Adopted: adopted, Set: slices.Clone(o.Set), NoTaint: o.NoTaint, Taint: o.Taint,
		TolerateExistingTaints: o.TolerateExistingTaints, Monitoring: o.Monitoring, DRA: o.DRA, Channel: o.Channel, Registry: o.Registry, ImagePullSecrets: slices.Clone(o.ImagePullSecrets),
		Sharing: recordedSharing(o.Sharing), MIG: recordedMIG(o.MIG), Precompiled: o.Precompiled}
}

// recordedSharing is --sharing as the record keeps it: "none" is no sharing, nothing to keep.
func recordedSharing(values []string) []string {
	if len(values) == 1 && values[0] == plan.SharingNone {
		return nil
	}
	return slices.Clone(values)
}

// recordedMIG is --mig as the record keeps it: "none" is no choice, nothing to keep.
func recordedMIG(values []string) []string {
	if len(values) == 1 && values[0] == plan.MIGNone {
		return nil
	}
	return slices.Clone(values)
}

// verb is the command the record names.
func (i *Install) verb() string {
	if i.command != "" {
		return i.command
	}
	return "install"
}

// parseValueLayers reads the -f files below the recorded layers upgrade passes on.
func parseValueLayers(o InstallOptions) ([]plan.Layer, error) {
	files := slices.Clone(o.ValueLayers)
	for _, f := range o.ValuesFiles {
		v, err := render.ReadValuesFile(f)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", plan.ErrInput, err)
		}
		files = append(files, plan.Layer{Source: f, Values: v})
	}
	return files, nil
}
