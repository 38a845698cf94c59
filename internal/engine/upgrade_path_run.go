package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// runPath runs an upgrade of more than one hop: each hop is runHop (its own lock, preflight, CRDs
// first, one Helm revision of each release that changes, the waits until the stack is healthy), in
// order. The first hop, before its first write, previews every later hop and asks once for the whole
// path. Each hop writes the install record (its OperatorVersion is the hop's release), so an interrupt
// or a failure leaves a stack a rerun goes on from. net is the value changes from the installed release
// to the target.
func (u *Upgrade) runPath(ctx context.Context, rec *record.Record, hops []upgradeHop, files []plan.Layer, o UpgradeOptions, sink event.Sink,
	net *bundle.ValueChanges) (*UpgradeResult, error) {
	res := &UpgradeResult{Path: pathOf(hops)}
	for i, h := range hops {
		if i > 0 && runner.Interrupted(ctx) {
			return res, hopError(&runner.InterruptedError{BeforeFirstWrite: true}, hops, i)
		}
		sink.Event(event.Event{Time: time.Now(), Type: event.Info, Message: hopMessage(hops, i)})
		var confirm func(context.Context, *UpgradePreview, map[string]releaseState) error
		if i == 0 {
			confirm = func(ctx context.Context, first *UpgradePreview, after map[string]releaseState) error {
				return u.confirmPath(ctx, rec, hops, files, o, first, after)
			}
		}
		hr, err := u.runHop(ctx, hopRecord(rec, h, i > 0, o), h, files, o, sink, confirm)
		res.addHop(h, hr, net)
		if err != nil {
			return res, hopError(err, hops, i)
		}
	}
	return res, nil
}

// dryRunPath previews every hop (the install pipeline's dry run, which takes no lock), each later hop
// against what the hop before renders; nothing is written.
func (u *Upgrade) dryRunPath(ctx context.Context, rec *record.Record, hops []upgradeHop, files []plan.Layer, o UpgradeOptions, sink event.Sink,
	net *bundle.ValueChanges) (*UpgradeResult, error) {
	res := &UpgradeResult{DryRun: true, Path: pathOf(hops)}
	var before map[string]releaseState
	for i, h := range hops {
		hr, after, err := u.dryRunHop(ctx, hopRecord(rec, h, i > 0, o), h, files, o, sink, before)
		if len(hops) > 1 {
			res.addHop(h, hr, net)
		} else {
			res.Install, res.Preview = hr.Install, hr.Preview
		}
		if err != nil {
			return res, err
		}
		before = after
	}
	return res, nil
}

// confirmPath previews the hops after the first (dry runs of the install pipeline, each against what
// the hop before renders) and asks once for the whole path: called under the first hop's lock, before
// its first write.
func (u *Upgrade) confirmPath(ctx context.Context, rec *record.Record, hops []upgradeHop, files []plan.Layer, o UpgradeOptions,
	first *UpgradePreview, after map[string]releaseState) error {
	previews := []*UpgradePreview{first}
	for i := 1; i < len(hops); i++ {
		// No sink: each hop reports its plan's warnings when it runs.
		hr, next, err := u.dryRunHop(ctx, hopRecord(rec, hops[i], true, o), hops[i], files, o, nil, after)
		if err != nil {
			return fmt.Errorf("preview the upgrade %s → %s: %w", hops[i].from, hops[i].to.Version, err)
		}
		previews, after = append(previews, hr.Preview), next
	}
	if u.Confirm != nil && !u.Confirm(previews) {
		return ErrNotConfirmed
	}
	return nil
}

// addHop records a hop's result; the result's own fields become the hop's, but for the value changes,
// which stay those from the installed release to the target (net).
func (r *UpgradeResult) addHop(h upgradeHop, hr *UpgradeResult, net *bundle.ValueChanges) {
	r.Hops = append(r.Hops, &UpgradeHop{From: h.from, To: h.to.Version, Preview: hr.Preview, Install: hr.Install, DriverUpgrades: hr.DriverUpgrades})
	r.Install, r.DriverUpgrades = hr.Install, hr.DriverUpgrades
	if hr.Preview != nil {
		top := *hr.Preview
		top.Values = net
		r.Preview = &top
	}
}

// hopRecord is rec as hop h starts from it: at the release the hop before left, with --sharing and
// --mig as the hops before set them. The other inputs stay the recorded ones, with the new -f and --set
// over them again at each hop, so each hop records what a one-hop upgrade would.
func hopRecord(rec *record.Record, h upgradeHop, later bool, o UpgradeOptions) *record.Record {
	r := *rec
	r.OperatorVersion = h.from
	if later && len(o.Sharing) > 0 {
		r.Inputs.Sharing = recordedSharing(o.Sharing)
	}
	if later && len(o.MIG) > 0 {
		r.Inputs.MIG = recordedMIG(o.MIG)
	}
	return &r
}

// hopMessage announces hop i of a path.
func hopMessage(hops []upgradeHop, i int) string {
	h := hops[i]
	if h.change == plan.VersionSame {
		return fmt.Sprintf("upgrade %d/%d: finish %s (the last run was interrupted) before the next major", i+1, len(hops), h.to.Version)
	}
	return fmt.Sprintf("upgrade %d/%d: %s → %s (%s)", i+1, len(hops), h.from, h.to.Version, nvidiaUpgradeRule)
}

// hopID names a hop as a step of the path.
func hopID(h upgradeHop) string { return "upgrade-" + h.to.Version }

// hopError is the error of hop i of hops. An interrupt before the first hop's first write changed
// nothing and stays as it is; one before a later hop's first write says which hops finished (the stack
// runs the last one's release, healthy: a release NVIDIA supports upgrading from) and how to go on; one
// during a hop's writes or waits keeps the hop's own account, with the path's way on. A later hop's
// failure names the hop.
func hopError(err error, hops []upgradeHop, i int) error {
	target := hops[len(hops)-1].to.Version
	var ie *runner.InterruptedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ie) && ie.BeforeFirstWrite && i == 0:
		return err
	case errors.As(err, &ie) && ie.BeforeFirstWrite:
		out := &runner.InterruptedError{Count: len(hops),
			Resume: fmt.Sprintf("run gpuctl upgrade --operator-version %s again: the stack runs %s, healthy, and the upgrade goes on from there", target, hops[i].from)}
		for _, h := range hops[:i] {
			out.Finished = append(out.Finished, runner.StepResult{ID: hopID(h), Title: "Upgrade " + h.from + " → " + h.to.Version,
				Outcome: event.StepSucceeded, Message: "the stack runs " + h.to.Version})
		}
		for _, h := range hops[i:] {
			out.NotStarted = append(out.NotStarted, hopID(h))
		}
		return out
	case errors.As(err, &ie) && len(hops) == 1:
		ie.Resume = fmt.Sprintf("run gpuctl upgrade --operator-version %s again: it continues where this run stopped", target)
		return err
	case errors.As(err, &ie):
		ie.Resume = fmt.Sprintf("run gpuctl upgrade --operator-version %s again: it goes on from the release the stack runs (upgrade %d/%d, %s → %s, was in flight)",
			target, i+1, len(hops), hops[i].from, hops[i].to.Version)
		return err
	case i == 0:
		return err
	}
	return fmt.Errorf("upgrade %d/%d, %s → %s (the stack ran %s, healthy, before it): %w", i+1, len(hops), hops[i].from, hops[i].to.Version, hops[i].from, err)
}
