package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/profile"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// TaintNodes taints the GPU nodes detection finds with nvidia.com/gpu=present:NoSchedule, recording
// what it adds so UntaintNodes removes exactly that. It runs under gpuctl's install lock, as install
// does (a dry run takes none).
type TaintNodes struct {
	Clients *kube.Clients
	DryRun  bool
	// WaitForLock is how long to wait for another run's install lock (0: fail at once with ErrLocked).
	WaitForLock time.Duration
	// Sink receives the lock's warnings (nil: discarded).
	Sink event.Sink
	// OnNode reports each node's outcome as it happens.
	OnNode func(taint.NodeResult)
}

// Run taints and returns the per-node result.
func (t *TaintNodes) Run(ctx context.Context) (res taint.Result, err error) {
	if !t.DryRun {
		// Taken before detection: the nodes it finds are the ones no other run is changing.
		var lk *writeLock
		if ctx, lk, err = takeLock(ctx, t.Clients, t.WaitForLock, t.Sink); err != nil {
			return taint.Result{}, lockError(err)
		}
		defer lk.release(ctx)
		defer func() { err = lk.lost(err) }()
	}
	snap, err := detect.Gather(ctx, detect.Clients{Kube: t.Clients.Kube, Discovery: t.Clients.Discovery, Dynamic: t.Clients.Dynamic})
	if err != nil {
		return taint.Result{}, fmt.Errorf("detect: %w", err)
	}
	det := detect.Analyze(snap)
	var nodes []string
	for _, n := range det.GPUNodes {
		nodes = append(nodes, n.Name)
	}
	if len(nodes) == 0 {
		return taint.Result{}, fmt.Errorf("no GPU nodes found (no nvidia.com/gpu capacity, NFD PCI label or cloud accelerator label): nothing to taint")
	}
	// The nodes detection just listed serve the taint too: one LIST of every node, not two.
	return (&taint.Taint{Client: t.Clients.Kube, Taint: taint.GPUTaint, DryRun: t.DryRun, OnNode: t.OnNode, Nodes: snap.Nodes}).Run(ctx, nodes)
}

// UntaintNodes removes the taints gpuctl added, and only those, from every node that records any,
// under gpuctl's install lock (a dry run takes none).
type UntaintNodes struct {
	Clients     *kube.Clients
	DryRun      bool
	WaitForLock time.Duration
	Sink        event.Sink
	OnNode      func(taint.NodeResult)
}

// Run untaints.
func (u *UntaintNodes) Run(ctx context.Context) (res taint.Result, err error) {
	if !u.DryRun {
		var lk *writeLock
		if ctx, lk, err = takeLock(ctx, u.Clients, u.WaitForLock, u.Sink); err != nil {
			return taint.Result{}, lockError(err)
		}
		defer lk.release(ctx)
		defer func() { err = lk.lost(err) }()
	}
	return (&taint.Untaint{Client: u.Clients.Kube, DryRun: u.DryRun, OnNode: u.OnNode}).Run(ctx, nil)
}

// Template renders every chart, in install order, with the values an install would use: the namespace
// and platform prerequisites first, then each chart with its CRDs. With a Profile it needs no cluster
// (the distribution is taken to be the profile's); without one it detects the cluster.
type Template struct {
	// Clients is needed only when Profile is empty.
	Clients     *kube.Clients
	Namespace   string
	Options     InstallOptions
	KubeVersion string
	// Detection, when set, is used instead of detecting the cluster again (Images detects first).
	Detection *detect.Result
}

// Run returns the rendered manifests and the plan they came from.
func (t *Template) Run(ctx context.Context) (string, *plan.Plan, error) {
	var det *detect.Result
	if t.Options.Profile != "" {
		if _, err := profile.Get(t.Options.Profile); err != nil {
			return "", nil, err
		}
		det = &detect.Result{Distribution: detect.Candidate{Name: t.Options.Profile, Fallback: true}}
	} else if t.Detection != nil {
		det = t.Detection
	} else {
		if t.Clients == nil {
			return "", nil, fmt.Errorf("without --profile, template detects the cluster: no cluster configured")
		}
		d, err := (&Detect{Clients: t.Clients}).Run(ctx)
		if err != nil {
			return "", nil, err
		}
		det = d
	}
	ns := t.Namespace
	if ns == "" {
		ns = "gpu-operator"
	}
	// Rendering needs no secret material: name the inputs so the plan builds, and read none.
	o := t.Options
	if o.Licensing == (plan.Licensing{}) {
		o.Licensing = plan.Licensing{NLSTokenFile: "(read at install)", GriddConfFile: "(read at install)", NGCAPIKeyEnv: "(read at install)"}
	}
	i := &Install{Clients: &kube.Clients{Namespace: ns}}
	p, err := i.buildPlan(det, o)
	if err != nil {
		return "", nil, err
	}
	var b strings.Builder
	for _, s := range p.Steps {
		if s.Skip != "" {
			continue
		}
		switch s.Kind {
		case plan.KindObjects:
			for _, o := range s.Objects {
				y, err := render.YAMLDoc(o)
				if err != nil {
					return "", nil, err
				}
				fmt.Fprintf(&b, "---\n# Source: gpuctl %s\n%s", s.ID, y)
			}
		case plan.KindRelease:
			ch, err := render.LoadChart(s.Release.Chart, s.Release.AppVersion)
			if err != nil {
				return "", nil, err
			}
			out, err := (&release.Render{Name: s.Release.Name, Namespace: ns, Chart: ch, Values: s.Release.Values, KubeVersion: t.KubeVersion, IncludeCRDs: true}).Run(ctx)
			if err != nil {
				return "", nil, err
			}
			b.WriteString(out)
		}
	}
	return b.String(), p, nil
}
