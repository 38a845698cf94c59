package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/driverimage"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
	"github.com/gpuctl/gpuctl/internal/step"
)

// Check runs the pre-install checks (`gpuctl check --pre`): detect, plan with the same options an
// install would use, render what the install would write, and judge it all with package preflight.
// It only reads.
type Check struct {
	Clients *kube.Clients
	// Options are the install's options; the checks judge the Plan they give.
	Options InstallOptions
	// Skip are the IDs of checks not to run.
	Skip []string
	// Timeout bounds the whole check (0: DefaultCheckTimeout).
	Timeout time.Duration
}

// CheckResult is what Check found.
type CheckResult struct {
	// Detection and Plan are nil when they could not be made; the Report says why.
	Detection *detect.Result   `json:"detection,omitempty"`
	Plan      *plan.Plan       `json:"plan,omitempty"`
	Report    preflight.Report `json:"report"`
}

// Run runs the checks. It returns the result and an error wrapping ErrPreflightFailed when a check
// failed; other errors mean the checks could not run (an unknown Skip ID, a cancelled context).
// A cluster that cannot be detected or planned for is a failed check, not an error.
func (c *Check) Run(ctx context.Context) (*CheckResult, error) {
	runner := &preflight.Runner{Skip: c.Skip}
	if err := runner.Validate(); err != nil {
		return nil, err
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = DefaultCheckTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res := &CheckResult{}
	det, detErr := detect.Run(ctx, detect.From(c.Clients))
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var p *plan.Plan
	var planErr error
	var tags *tagCache
	if detErr == nil {
		res.Detection = det
		inst := &Install{Clients: c.Clients}
		p, planErr = inst.buildPlan(ctx, det, c.Options)
		tags = inst.registry()
		if errors.Is(planErr, plan.ErrInput) {
			// A mistake in the inputs (an unknown --operator-version, a values file that does not
			// parse) is a usage error here as in install, not a failed check.
			return res, planErr
		}
		res.Plan = p
	}
	rep, err := runPreflight(ctx, c.Clients, c.Options, c.Skip, preflightInput{detection: det, detectErr: detErr, plan: p, planErr: planErr, tags: tags})
	res.Report = rep
	if err != nil {
		return res, err
	}
	if r, ok := c.upgradeValues(ctx); ok {
		res.Report.Results = append(res.Report.Results, r)
	}
	if err := preflightError(rep); err != nil {
		return res, err
	}
	// Skipping the api or plan check does not make a cluster that cannot be read or planned for pass.
	if detErr != nil {
		return res, fmt.Errorf("%w: %v", preflight.ErrFailed, detErr)
	}
	if planErr != nil {
		return res, fmt.Errorf("%w: plan: %v", preflight.ErrFailed, planErr)
	}
	return res, nil
}

// preflightInput is what detection and planning produced, or why they failed.
type preflightInput struct {
	detection *detect.Result
	detectErr error
	plan      *plan.Plan
	planErr   error
	// tags is the run's registry client (nil: a new one).
	tags *tagCache
}

// runPreflight renders what the Plan would write and runs the checks on it. Install.Run calls it with
// its own detection and Plan before its first write.
func runPreflight(ctx context.Context, clients *kube.Clients, o InstallOptions, skip []string, in preflightInput) (preflight.Report, error) {
	env := &preflight.Env{
		Kube:        clients.Kube,
		Mapper:      clients.Mapper,
		Namespace:   clients.Namespace,
		Detection:   in.detection,
		DetectError: in.detectErr,
		Plan:        in.plan,
		PlanError:   in.planErr,
	}
	if in.plan != nil {
		env.Namespace = in.plan.Namespace
		needs, err := step.Needs(in.plan)
		env.StepNeeds = needs
		if err != nil {
			env.PlanError = err
		}
		kubeVersion := ""
		if in.detection != nil {
			kubeVersion = in.detection.KubernetesVersion
		}
		objs, sizes, err := step.Render(ctx, in.plan, kubeVersion)
		env.ReleaseSizes = sizes
		if err != nil {
			if ctx.Err() != nil {
				return preflight.Report{}, ctx.Err()
			}
			env.PlanError = err
		}
		env.Objects = objs
		env.Removed = removedByUpgrade(clients, in.plan, objs)
	}
	b, err := chooseBundle(o)
	if err != nil {
		return preflight.Report{}, err
	}
	env.Bundle = b
	// Precompiled drivers: the registry the driver image comes from is asked for its tags, each
	// repository within driverimage's deadline and all within the command's context (install's
	// --timeout).
	if in.tags == nil {
		in.tags = &tagCache{}
	}
	env.Tags = in.tags
	return (&preflight.Runner{Skip: skip}).Run(ctx, env)
}

// removedByUpgrade are the objects of the plan's releases, as deployed now, that objs (the new render)
// no longer has, by group, kind and name: upgrading the release, Helm deletes them, and one it may not
// delete it leaves running with no more than a debug log line, the upgrade reported a success
// (helm.sh/helm/v4 v4.3.1 pkg/kube/client.go, Update). Objects Helm keeps
// (helm.sh/resource-policy: keep) are not among them. A release that cannot be read adds none: the
// check asks only for what it knows the upgrade does.
func removedByUpgrade(clients *kube.Clients, p *plan.Plan, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	if clients.Getter == nil {
		return nil
	}
	key := func(o *unstructured.Unstructured) string {
		return o.GroupVersionKind().Group + "/" + o.GetKind() + "/" + o.GetName()
	}
	rendered := map[string]bool{}
	for _, o := range objs {
		rendered[key(o)] = true
	}
	helm := release.NewClients(clients.Getter)
	var out []*unstructured.Unstructured
	for _, s := range p.Steps {
		if s.Kind != plan.KindRelease || s.Release == nil {
			continue
		}
		rc, err := helm.In(s.Release.Namespace)
		if err != nil {
			continue
		}
		manifest, err := rc.Manifest(s.Release.Name)
		if err != nil || manifest == "" {
			continue
		}
		deployed, err := render.DecodeManifest(manifest)
		if err != nil {
			continue
		}
		for _, o := range deployed {
			if !rendered[key(o)] && o.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
				if o.GetNamespace() == "" {
					o.SetNamespace(s.Release.Namespace)
				}
				out = append(out, o)
			}
		}
	}
	return out
}

// registryTimeout bounds one registry's answer: driverimage's deadline, or half of what is left of
// ctx if that is less, so an air-gapped registry is a warning while the run still has time to report
// it, not an expired run.
func registryTimeout(ctx context.Context) time.Duration {
	d := driverimage.DefaultTimeout
	if deadline, ok := ctx.Deadline(); ok {
		d = min(d, (time.Until(deadline) / 2).Truncate(time.Second))
	}
	return max(d, time.Second)
}

// preflightStep is the ID and title under which an install reports its preflight checks.
const (
	preflightStep  = "preflight"
	preflightTitle = "Preflight checks"
)

// installPreflight runs the checks for Install.Run, after planning and before the first write, and
// reports them as a step outside the Plan: each warning as a Warning event, the failures as one
// StepFailed event whose Detail lists them with their hints. planErr is a planning error that is not
// plan.ErrUnsupported (those stop the install as they are): it becomes the failed "plan" check, beside
// the checks that say why (existing-operator for another operator, …). The error wraps
// ErrPreflightFailed when a check failed.
func installPreflight(ctx context.Context, clients *kube.Clients, o InstallOptions, skip []string, det *detect.Result, p *plan.Plan, planErr error, sink event.Sink, tags *tagCache) (preflight.Report, error) {
	emit := func(e event.Event) {
		e.Time, e.Step, e.Title = time.Now(), preflightStep, preflightTitle
		sink.Event(e)
	}
	emit(event.Event{Type: event.StepStarted})
	rep, err := runPreflight(ctx, clients, o, skip, preflightInput{detection: det, plan: p, planErr: planErr, tags: tags})
	if err != nil {
		emit(event.Event{Type: event.StepFailed, Err: err.Error()})
		return rep, err
	}
	counts := map[preflight.Status]int{}
	var failed []string
	for _, r := range rep.Results {
		counts[r.Status]++
		switch r.Status {
		case preflight.StatusWarn:
			sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Message: r.Description + ": " + strings.ReplaceAll(r.Message, "\n", "; "), Hint: r.Hint})
		case preflight.StatusFail:
			text := r.Description + ":\n" + indent(r.Message)
			if r.Hint != "" {
				text += "\n  hint: " + r.Hint
			}
			failed = append(failed, text)
		}
	}
	summary := fmt.Sprintf("%d passed, %d warnings, %d skipped", counts[preflight.StatusPass], counts[preflight.StatusWarn], counts[preflight.StatusSkip])
	err = preflightError(rep)
	if err == nil && (p == nil || planErr != nil) {
		// The plan check was skipped, but without a Plan there is nothing to install.
		err = fmt.Errorf("%w: plan: %v", preflight.ErrFailed, planErr)
		failed = append(failed, "gpuctl can plan the install:\n"+indent(fmt.Sprint(planErr)))
	}
	if err != nil {
		hint := "nothing was changed; fix what failed, or skip a check with --skip-check <id> if you know why it fails"
		if p == nil || planErr != nil {
			hint = "nothing was changed; gpuctl cannot plan the install until what failed is fixed"
		}
		emit(event.Event{Type: event.StepFailed, Message: fmt.Sprintf("%d failed, %s", counts[preflight.StatusFail], summary),
			Err: err.Error(), Detail: strings.Join(failed, "\n"), Hint: hint})
		return rep, err
	}
	emit(event.Event{Type: event.StepSucceeded, Message: summary})
	return rep, nil
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// chooseBundle is the GPU Operator release the install targets.
func chooseBundle(o InstallOptions) (bundle.Bundle, error) {
	return bundle.Get(o.OperatorVersion)
}

// preflightError is nil for a report without failures, else an error wrapping ErrPreflightFailed
// that names the failed checks.
//
// When every failed check judges the user's inputs (the values too large for a release), the error
// wraps plan.ErrInput instead: a mistake in the command line, not in the cluster. Its text is the checks'
// messages, so the one line the CLI prints says what is wrong.
func preflightError(rep preflight.Report) error {
	if !rep.Failed {
		return nil
	}
	failed := rep.IDs(preflight.StatusFail)
	if len(rep.InputFailed) == len(failed) {
		var msgs []string
		for _, id := range failed {
			msgs = append(msgs, strings.ReplaceAll(rep.Get(id).Message, "\n", "; "))
		}
		return fmt.Errorf("%w: %s", plan.ErrInput, strings.Join(msgs, "; "))
	}
	return fmt.Errorf("%w: %s", preflight.ErrFailed, strings.Join(failed, ", "))
}

// dryRunRefusals are what a dry run says of the checks whose verdict is about the run's own writes
// rather than the cluster's readiness (gpu-work: the GPU pods a MIG, sharing or DRA change would
// stop), as warnings: "the run would stop here". Skipped checks (--skip-check, --force) stay skipped.
func dryRunRefusals(ctx context.Context, clients *kube.Clients, skip []string, det *detect.Result, p *plan.Plan) []string {
	var checks []preflight.Check
	for _, c := range preflight.Checks() {
		if c.ID == "gpu-work" && !slices.Contains(skip, c.ID) {
			checks = append(checks, c)
		}
	}
	if len(checks) == 0 {
		return nil
	}
	env := &preflight.Env{Kube: clients.Kube, Mapper: clients.Mapper, Namespace: p.Namespace, Detection: det, Plan: p}
	rep, err := (&preflight.Runner{Checks: checks}).Run(ctx, env)
	if err != nil {
		return []string{"the run's gpu-work check could not run: " + err.Error()}
	}
	var out []string
	for _, r := range rep.Results {
		if r.Status == preflight.StatusFail {
			w := "the run would stop before its first write (exit 5): " + r.Description + ": " + strings.ReplaceAll(r.Message, "\n", "; ")
			if r.Hint != "" {
				w += " (" + r.Hint + ")"
			}
			out = append(out, w)
		}
	}
	return out
}
