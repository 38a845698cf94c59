package step

import (
	"context"
	"errors"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// Install carries out an install (or upgrade) Plan under the lock its verb holds, then writes the
// install record from what existed before the first write and what exists after.
type Install struct {
	Clients *kube.Clients
	Plan    *plan.Plan
	Sink    event.Sink
	// Secrets are the Secret objects of the plan's KindSecrets steps, read before the run (their
	// contents never reach an event).
	Secrets []map[string]any
	// runner.Lock is the install lock the verb took; its holder identity labels what the releases write.
	Lock *runner.Lock
	// Inputs, Version and Command are what the install record says of the run.
	Inputs  record.Inputs
	Version string
	Command string
}

// InstallOutcome is what an install run did.
type InstallOutcome struct {
	Steps []runner.StepResult
	// GPUNodes are the GPU nodes at the end: the plan's, and any NFD or the operator labelled since.
	GPUNodes []string
	Changed  bool
	// Releases are the Helm releases of the plan after the run.
	Releases []*release.Release
}

// Run carries the plan out. The record is written whatever the run's end, an interrupt included.
func (in *Install) Run(ctx context.Context) (*InstallOutcome, error) {
	x := &executor{clients: in.Clients, plan: in.Plan, sink: event.Or(in.Sink), gpuNodes: in.Plan.GPUNodes, secrets: in.Secrets,
		runID: in.Lock.RunID(), releases: release.NewClients(in.Clients.Getter), extraValues: map[string]map[string]any{}}
	before, err := x.snapshotBefore(ctx)
	if err != nil {
		return &InstallOutcome{}, err
	}
	x.labelsBefore = before.nodes
	r := &runner.Runner{Sink: x.sink, Resume: runner.ResumeHint}
	err = r.Run(ctx, x.steps())
	if rerr := x.writeRecord(ctx, before, in.Inputs, in.Version, in.Command, err); rerr != nil {
		err = errors.Join(err, rerr)
	}
	out := &InstallOutcome{Steps: r.Results, GPUNodes: x.gpuNodes, Changed: r.Changed, Releases: x.lastReleases()}
	return out, in.Lock.Lost(err)
}

// lastReleases are the plan's releases as Helm has them now (values left out: the plan has them).
func (x *executor) lastReleases() []*release.Release {
	var out []*release.Release
	for _, rel := range x.plan.RunningReleases() {
		rc, err := x.releaseClient(rel.Namespace)
		if err != nil {
			continue
		}
		if r, _ := rc.Last(rel.Name); r != nil {
			r.Values = nil
			out = append(out, r)
		}
	}
	return out
}
