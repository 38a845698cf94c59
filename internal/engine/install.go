package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/lock"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/profile"
	"github.com/gpuctl/gpuctl/internal/release"
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
	// WaitForLock is how long to wait for another run's install lock (0: fail at once with ErrLocked).
	WaitForLock time.Duration
	// Registry is the --registry mirror every image is pulled from ("" = the images' own registries).
	Registry string
	// ImagePullSecrets name the Secrets (in the install namespace) every pod pulls its images with.
	ImagePullSecrets []string
	// ValueLayers are values files already read (upgrade reuses the recorded ones), below ValuesFiles.
	ValueLayers []plan.Layer
}

// ErrInput marks a mistake in the user's inputs (a values file, a --set expression, an unknown
// operator version): reported as such, not as a failed preflight check.
var ErrInput = plan.ErrInput

// ErrLocked: another gpuctl run holds the install lock (internal/lock); nothing was changed.
var ErrLocked = lock.ErrLocked

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
	Steps []StepResult `json:"steps,omitempty"`
	// GPUNodes are the GPU nodes gpuctl validated.
	GPUNodes []string `json:"gpuNodes,omitempty"`
	// Changed is false when the run changed nothing in the cluster.
	Changed bool `json:"changed"`
	// Releases are the Helm releases after the run.
	Releases []*release.Release `json:"releases,omitempty"`
	// Preflight is the report of the checks run before the first write.
	Preflight *preflight.Report `json:"preflight,omitempty"`
	// Interrupted says how far an interrupted run got (nil when it was not interrupted).
	Interrupted *InterruptedError `json:"interrupted,omitempty"`
	// TaintedUnlisted are the nodes the run tainted that the plan did not name: GPU nodes NFD labelled
	// during the run, tainted by the plan's rule (a dry run's Writes.NodeRule).
	TaintedUnlisted []string `json:"taintedUnlisted,omitempty"`
}

// StepResult is the outcome of one step.
type StepResult struct {
	ID      string     `json:"id"`
	Title   string     `json:"title"`
	Outcome event.Type `json:"outcome"`
	Message string     `json:"message,omitempty"`
	Changed bool       `json:"changed"`
}

// Run detects, plans, and (unless DryRun) executes the Plan. The context bounds everything; its
// cancellation (Ctrl-C) stops the run between API calls.
func (i *Install) Run(ctx context.Context) (res *InstallResult, err error) {
	defer func() {
		// An interrupt before the executor started (the lock wait, detection, preflight) changed nothing.
		if err != nil && errors.Is(err, context.Canceled) && !errors.As(err, new(*InterruptedError)) && errors.Is(context.Cause(ctx), context.Canceled) {
			ie := &InterruptedError{BeforeFirstWrite: true}
			if res != nil {
				res.Interrupted = ie
			}
			err = ie
		}
	}()
	o := i.Options
	if o.Timeout == 0 {
		o.Timeout = 20 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	sink := event.Or(i.Sink)

	// Every input is read and judged first, with nothing written (the lock's Lease neither): a values
	// file that does not parse or an unknown operator release changes nothing.
	in, err := i.readInputs(o)
	if err != nil {
		return &InstallResult{}, err
	}
	if i.Reach != nil {
		if err := i.Reach(ctx); err != nil {
			return &InstallResult{}, err
		}
	}
	// One writer at a time (internal/lock). The lock is taken before detection, not just before the
	// first write: detection, the plan and preflight must not judge a cluster another run is halfway
	// through changing (its new ClusterPolicy is not "another tool's"). A dry run takes no lock.
	var lk *writeLock
	var lockErr error // a lock this run may not take: reported after preflight, with the other permissions
	if !o.DryRun {
		ctx, lk, lockErr = takeLock(ctx, i.Clients, o.WaitForLock, sink)
		if lockErr != nil && !apierrors.IsForbidden(lockErr) {
			return &InstallResult{}, lockErr
		}
	}
	if lk != nil {
		defer lk.release(ctx)
	}

	det, err := detect.Run(ctx, detect.From(i.Clients))
	if err != nil {
		return nil, err
	}
	res = &InstallResult{Detection: det}
	p, planErr := i.planWith(det, o, in)
	if errors.Is(planErr, plan.ErrUnsupported) || errors.Is(planErr, ErrInput) {
		return res, planErr // unsupported clusters keep their own exit code; input mistakes are usage errors
	}
	res.Plan = p
	if p != nil {
		for _, w := range p.Warnings {
			sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Message: w})
		}
	}
	if o.DryRun && planErr == nil {
		p.Writes, err = installWrites(ctx, i.Clients, p)
		return res, err
	}
	// Preflight judges the plan before the first write; a failed check (or a plan that cannot be
	// built, e.g. another tool's operator is installed) stops the run with nothing changed.
	rep, err := installPreflight(ctx, i.Clients, o, o.SkipChecks, det, p, planErr, sink)
	res.Preflight = &rep
	if err != nil {
		return res, err
	}
	// Secret inputs are read now: a missing or empty one must fail before the first write.
	secrets, err := i.secretMaterial(p)
	if err != nil {
		sink.Event(event.Event{Time: time.Now(), Type: event.StepFailed, Step: preflightStep, Title: preflightTitle, Err: err.Error(),
			Hint: "nothing was changed; provide the NVIDIA AI Enterprise inputs and run gpuctl install again"})
		return res, fmt.Errorf("%w: %w", ErrPreflightFailed, err)
	}
	if lockErr != nil {
		sink.Event(event.Event{Time: time.Now(), Type: event.StepFailed, Step: preflightStep, Title: preflightTitle, Err: lockErr.Error(),
			Hint: "nothing was changed; gpuctl needs permission to create and update Leases in " + lock.DefaultNamespace})
		return res, fmt.Errorf("%w: no permission to take gpuctl's install lock: %w", ErrPreflightFailed, lockErr)
	}
	if i.Confirm != nil && !i.Confirm(p) {
		return res, ErrNotConfirmed
	}
	if lk == nil {
		return res, errors.New("no install lock: a dry run changes nothing")
	}
	x := &executor{clients: i.Clients, plan: p, sink: sink, gpuNodes: p.GPUNodes, secrets: secrets, runID: lk.held.Identity()}
	x.releases = map[string]*release.Client{}
	before, err := x.snapshotBefore(ctx)
	if err != nil {
		return res, err
	}
	taintedBefore, err := gpuctlTainted(ctx, i.Clients.Kube)
	if err != nil {
		return res, err
	}
	err = x.run(ctx)
	res.TaintedUnlisted = taintedUnlisted(ctx, i.Clients.Kube, p, taintedBefore, sink)
	if ierr := (*InterruptedError)(nil); errors.As(err, &ierr) {
		res.Interrupted = ierr
	}
	if rerr := x.writeRecord(ctx, before, recordInputs(o, i.files), i.Version, i.verb(), err); rerr != nil {
		err = errors.Join(err, rerr)
	}
	err = lk.lost(err)
	res.Steps, res.GPUNodes, res.Changed = x.results, x.gpuNodes, x.changed
	for _, s := range p.Steps {
		if s.Release == nil || s.Skip != "" {
			continue
		}
		if rc, rerr := x.releaseClient(s.Release.Namespace); rerr == nil {
			if r, _ := rc.Last(s.Release.Name); r != nil {
				r.Values = nil // in the plan already; keeps -o json short
				res.Releases = append(res.Releases, r)
			}
		}
	}
	return res, err
}

// buildPlan reads the inputs and plans for det (check --pre and template: they take no lock).
func (i *Install) buildPlan(det *detect.Result, o InstallOptions) (*plan.Plan, error) {
	in, err := i.readInputs(o)
	if err != nil {
		return nil, err
	}
	return i.planWith(det, o, in)
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

// planWith builds the Plan for det from inputs already read.
func (i *Install) planWith(det *detect.Result, o InstallOptions, in *installInputs) (*plan.Plan, error) {
	var bv *plan.BundleValues
	if b := in.bundle; !b.Default {
		// The charts' defaults are the default bundle's; another bundle pins its images above them.
		bv = &plan.BundleValues{Version: b.Version, Operator: b.Values(), NFD: b.NFDValues()}
	}
	p, err := plan.Build(plan.Input{
		Detection: det,
		Profile:   profile.Get,
		Charts:    in.charts,
		Bundle:    bv,
		Options: plan.Options{
			Profile: o.Profile, Files: in.files, Set: in.set, Namespace: i.Clients.Namespace,
			NoTaint: o.NoTaint, Taint: o.Taint, Timeout: o.Timeout, Licensing: o.Licensing, Channel: o.Channel,
			TolerateExistingTaints: o.TolerateExistingTaints, Monitoring: o.Monitoring,
		},
	})
	if err != nil {
		return nil, err
	}
	return p, addImageLayers(p, o)
}
