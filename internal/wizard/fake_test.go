package wizard

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// epoch is the fake clock's time: events and the wizard's Now agree, so durations are stable.
var epoch = time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)

// fakeBackend answers like engine.Check and engine.Install on a small GKE-like cluster, without one.
// It counts writes: a step the fake "executes" after Confirm said yes.
type fakeBackend struct {
	distro string
	// failCheck makes preflight fail this check (detection and review alike).
	failCheck string
	// hostDriver marks the GPU nodes as having a host driver.
	hostDriver bool
	// blockAt makes Install wait at this step until its context is cancelled (Ctrl-C tests).
	blockAt string
	// blocked is closed when Install reaches blockAt.
	blocked chan struct{}
	// changeAfterReview makes Install's Plan differ from the last Check's (the cluster changed).
	changeAfterReview bool

	mu       sync.Mutex
	checks   []engine.InstallOptions
	installs []engine.InstallOptions
	writes   []string
	getenv   func(string) string
}

func newFake() *fakeBackend { return &fakeBackend{distro: "gke", blocked: make(chan struct{})} }

func (f *fakeBackend) Contexts() ([]KubeContext, string, error) {
	return []KubeContext{
		{Name: "dev", Cluster: "kind-dev", User: "kind-dev", Namespace: "default"},
		{Name: "gke-prod", Cluster: "gke_proj_us-central1_prod", User: "gke_proj_us-central1_prod"},
	}, "gke-prod", nil
}

func (f *fakeBackend) detection() *detect.Result {
	drv := ""
	if f.hostDriver {
		drv = "nvidia.com/gpu.deploy.driver=pre-installed"
	}
	return &detect.Result{
		Distribution: detect.Candidate{Name: f.distro, Description: "Google Kubernetes Engine", Version: "v1.33.5-gke.100", Confidence: 98,
			Evidence: []detect.Evidence{
				{Signal: "label", Value: "cloud.google.com/gke-nodepool=gpu-pool", Source: "all 3 nodes", Weight: 90},
				{Signal: "providerID", Value: "gce://proj/us-central1-a/gke-gpu-0", Source: "all 3 nodes", Weight: 80},
			}},
		KubernetesVersion: "v1.33.5",
		Nodes:             detect.NodeCounts{Total: 3, Workers: 3, GPU: 2},
		GPUNodes: []detect.GPUNode{
			{Name: "gke-gpu-0", Pool: "gpu-pool", GPUs: 1, Product: "nvidia-tesla-a100", OSImage: "Container-Optimized OS from Google", HostDriver: drv},
			{Name: "gke-gpu-1", Pool: "gpu-pool", GPUs: 1, Product: "nvidia-tesla-a100", OSImage: "Container-Optimized OS from Google", HostDriver: drv},
		},
		Pools: []detect.Pool{{Name: "gpu-pool", OS: "cos", Count: 2, GPUNodes: 2}, {Name: "default-pool", OS: "cos", Count: 1}},
	}
}

// planFor is the Plan the options give: the profile, the operator release, the taint and the --set
// values show in it.
func (f *fakeBackend) planFor(o engine.InstallOptions) *plan.Plan {
	prof, why := f.distro, "detected "+f.distro
	if o.Profile != "" {
		prof, why = o.Profile, "--profile "+o.Profile
	}
	op := "v26.7.0"
	if o.OperatorVersion != "" {
		op = o.OperatorVersion
	}
	nodes := []string{"gke-gpu-0", "gke-gpu-1"}
	set := map[string]any{}
	for _, s := range o.Set {
		set[s] = true
	}
	values := map[string]any{"driver": map[string]any{"enabled": false}, "cdi": map[string]any{"enabled": true}}
	layers := []plan.Layer{{Source: "profile " + prof, Values: map[string]any{"driver": map[string]any{"enabled": false}, "cdi": map[string]any{"enabled": true}}}}
	if len(o.Set) > 0 {
		layers = append(layers, plan.Layer{Source: "--set", Values: map[string]any{"set": o.Set}})
		values["set"] = o.Set
	}
	taint := plan.Step{ID: "taint", Kind: plan.KindTaint, Title: "Taint GPU nodes nvidia.com/gpu=present:NoSchedule",
		Taint: &plan.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule", Nodes: nodes}}
	if o.NoTaint {
		taint.Skip = "--no-taint"
	}
	p := &plan.Plan{Distribution: f.distro, DistributionWhy: "labels", Profile: prof, ProfileWhy: why, Namespace: "gpu-operator",
		GPUNodes: nodes, Timeout: plan.Duration(o.Timeout),
		Steps: []plan.Step{
			{ID: "namespace", Kind: plan.KindObjects, Title: "Namespace gpu-operator"},
			{ID: "crds", Kind: plan.KindCRDs, Title: "CRDs (server-side apply), GPU Operator " + op},
			{ID: "release-node-feature-discovery", Kind: plan.KindRelease, Title: "Install Node Feature Discovery v0.19.0",
				Release: &plan.Release{Name: "node-feature-discovery", Namespace: "gpu-operator", Chart: "node-feature-discovery", ChartVersion: "0.19.0",
					Values: map[string]any{"priorityClassName": "system-node-critical"}, Layers: []plan.Layer{{Source: "profile " + prof, Values: map[string]any{"priorityClassName": "system-node-critical"}}}}},
			{ID: "wait-nfd", Kind: plan.KindWaitNFD, Title: "Wait for NFD to label the GPU nodes"},
			taint,
			{ID: "release-gpu-operator", Kind: plan.KindRelease, Title: "Install NVIDIA GPU Operator " + op,
				Release: &plan.Release{Name: "gpu-operator", Namespace: "gpu-operator", Chart: "gpu-operator", ChartVersion: op[1:], Values: values, Layers: layers}},
			{ID: "wait-validators", Kind: plan.KindWaitValidators, Title: "Wait for the validator on every GPU node"},
			{ID: "wait-clusterpolicy", Kind: plan.KindWaitPolicy, Title: "Wait for ClusterPolicy cluster-policy to be ready", Target: "cluster-policy"},
		}}
	return p
}

func (f *fakeBackend) report() preflight.Report {
	r := preflight.Report{Results: []preflight.Result{
		{ID: "api", Category: preflight.CategoryAPI, Description: "can read the cluster through the Kubernetes API", Status: preflight.StatusPass},
		{ID: "permissions", Category: preflight.CategoryPermissions, Description: "you may do everything the install does", Status: preflight.StatusPass},
		{ID: "containerd-version", Category: preflight.CategoryVersions, Description: "container runtime is in the tested range", Status: preflight.StatusWarn,
			Message: "containerd 2.1.4 on gke-gpu-0 is newer than GPU Operator v26.7.0 was tested on", Hint: "it will probably work; report problems to NVIDIA"},
		{ID: "openshift-version", Category: preflight.CategoryVersions, Description: "OpenShift version is in the tested range", Status: preflight.StatusSkip, Message: "not OpenShift"},
	}}
	if f.failCheck != "" {
		r.Results = append(r.Results, preflight.Result{ID: f.failCheck, Category: preflight.CategoryExisting, Description: "no other GPU operator is installed",
			Status: preflight.StatusFail, Message: "gpu-operator runs in namespace nvidia (helm release nvidia/gpu-operator)", Hint: "uninstall it first: helm uninstall gpu-operator -n nvidia"})
		r.Failed = true
	}
	return r
}

func (f *fakeBackend) Check(_ context.Context, _ string, o engine.InstallOptions) (*engine.CheckResult, error) {
	f.mu.Lock()
	f.checks = append(f.checks, o)
	f.mu.Unlock()
	res := &engine.CheckResult{Detection: f.detection(), Plan: f.planFor(o), Report: f.report()}
	if res.Report.Failed {
		return res, fmt.Errorf("%w: %s", preflight.ErrFailed, f.failCheck)
	}
	return res, nil
}

func (f *fakeBackend) Install(ctx context.Context, _ string, o engine.InstallOptions, sink event.Sink,
	confirm func(*plan.Plan) bool, getenv func(string) string) (*engine.InstallResult, error) {
	f.mu.Lock()
	f.installs = append(f.installs, o)
	f.getenv = getenv
	f.mu.Unlock()
	at := epoch
	tick := func() time.Time { at = at.Add(2 * time.Second); return at }
	p := f.planFor(o)
	if f.changeAfterReview {
		p.GPUNodes = append(p.GPUNodes, "gke-gpu-2")
		f.changeAfterReview = false
	}
	res := &engine.InstallResult{Detection: f.detection(), Plan: p}
	sink.Event(event.Event{Time: tick(), Type: event.StepStarted, Step: preflightStep, Title: "Preflight checks"})
	sink.Event(event.Event{Time: tick(), Type: event.Warning, Message: "container runtime is in the tested range: containerd 2.1.4 is newer"})
	sink.Event(event.Event{Time: tick(), Type: event.StepSucceeded, Step: preflightStep, Title: "Preflight checks", Message: "3 passed, 1 warning, 1 skipped"})
	if !confirm(p) {
		if ctx.Err() != nil {
			return res, &runner.InterruptedError{BeforeFirstWrite: true}
		}
		return res, engine.ErrNotConfirmed
	}
	for i, s := range p.Steps {
		ev := event.Event{Step: s.ID, Title: s.Title, Index: i + 1, Count: len(p.Steps)}
		emit := func(e event.Event) {
			e.Step, e.Title, e.Index, e.Count, e.Time = ev.Step, ev.Title, ev.Index, ev.Count, tick()
			sink.Event(e)
		}
		if s.Skip != "" {
			emit(event.Event{Type: event.StepSkipped, Message: s.Skip})
			res.Steps = append(res.Steps, runner.StepResult{ID: s.ID, Title: s.Title, Outcome: event.StepSkipped})
			continue
		}
		emit(event.Event{Type: event.StepStarted})
		if s.Kind == plan.KindWaitValidators {
			emit(event.Event{Type: event.StepProgress, Message: "1/2 GPU nodes validated", Done: 1, Total: 2, Pending: []string{"gke-gpu-1"}})
		}
		if s.ID == f.blockAt {
			close(f.blocked)
			<-ctx.Done()
			state := "1/2 GPU nodes validated; gke-gpu-1 still waits"
			emit(event.Event{Type: event.StepInterrupted, Message: state, Hint: runner.ResumeHint})
			r := runner.StepResult{ID: s.ID, Title: s.Title, Outcome: event.StepInterrupted, Message: state}
			ie := &runner.InterruptedError{Count: len(p.Steps), InFlight: &r, NotStarted: []string{"wait-clusterpolicy"}}
			for _, done := range res.Steps {
				ie.Finished = append(ie.Finished, done)
			}
			res.Steps, res.Interrupted = append(res.Steps, r), ie
			return res, ie
		}
		f.mu.Lock()
		f.writes = append(f.writes, s.ID)
		f.mu.Unlock()
		emit(event.Event{Type: event.StepSucceeded, Message: "done"})
		res.Steps = append(res.Steps, runner.StepResult{ID: s.ID, Title: s.Title, Outcome: event.StepSucceeded, Message: "done", Changed: true})
	}
	res.GPUNodes, res.Changed = p.GPUNodes, true
	return res, nil
}

func (f *fakeBackend) wrote() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.writes)
}
