package engine

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/profile"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
)

// AcceptValueChangesFlag is the flag that acknowledges an upgrade's value changes.
const AcceptValueChangesFlag = "--accept-value-changes"

// ValueChangesError refuses an upgrade whose values the target release reads differently (keys it
// does not read, defaults that change) when they were not acknowledged: before anything is written,
// the install lock included.
type ValueChangesError struct {
	// Changes are the changes from the installed release to the target.
	Changes *bundle.ValueChanges
	// Path and Hops, for an upgrade through more than one hop: its releases, and the changes of each
	// hop that has any (the acknowledgement covers them all).
	Path []string
	Hops []*bundle.ValueChanges
}

func (e *ValueChangesError) Error() string {
	if len(e.Hops) > 0 {
		parts := make([]string, 0, len(e.Hops))
		for _, h := range e.Hops {
			parts = append(parts, h.From+" → "+h.To+": "+h.Summary())
		}
		return fmt.Sprintf("upgrade %s: %s; read them (gpuctl upgrade --dry-run lists them), then run again with %s. Nothing was changed",
			strings.Join(e.Path, " → "), strings.Join(parts, "; "), AcceptValueChangesFlag)
	}
	return fmt.Sprintf("upgrade %s → %s: %s; read them (gpuctl upgrade --dry-run lists them), then run again with %s. Nothing was changed",
		e.Changes.From, e.Changes.To, e.Changes.Summary(), AcceptValueChangesFlag)
}

// userValues are the values the user set for the operator release: those of a release gpuctl
// adopted, the recorded -f files and --set, then the new ones, merged as the plan merges them (null
// removes a key), without NFD's section.
func userValues(in record.Inputs, files []plan.Layer, set []string) (map[string]any, error) {
	out := map[string]any{}
	if in.Adopted != nil {
		out = plan.MergeValues(out, in.Adopted.Values)
	}
	for _, f := range append(append([]plan.Layer{}, in.Files...), files...) {
		out = plan.MergeValues(out, f.Values)
	}
	s, err := release.ParseSet(append(append([]string{}, in.Set...), set...))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", plan.ErrInput, err)
	}
	return plan.MergeValues(out, s), nil
}

// ValueChanges compares what the installed release and the target release read of the user's values
// (NVIDIA's chart of each release, internal/bundle/values_facts.json): keys the user set that the target
// does not read, and defaults that change for keys neither the user nor gpuctl (the target's image
// pins, the recorded profile, the layers of the upgrade's flags) sets. files and set are new inputs
// over the recorded ones; flags are the upgrade's --monitoring, --sharing, --mig, --dra and
// --precompiled (plan.FlagKeys).
func ValueChanges(rec *record.Record, to bundle.Bundle, files []plan.Layer, set []string, flags plan.Options) (*bundle.ValueChanges, error) {
	if rec == nil || rec.OperatorVersion == "" || rec.OperatorVersion == to.Version {
		return &bundle.ValueChanges{To: to.Version}, nil
	}
	facts, err := bundle.LoadValuesFacts()
	if err != nil {
		return nil, err
	}
	user, err := userValues(rec.Inputs, files, set)
	if err != nil {
		return nil, err
	}
	gpuctl := []map[string]any{to.Values(), plan.FlagKeys(flags)}
	if rec.Profile != "" {
		if p, err := profile.Get(rec.Profile); err == nil {
			gpuctl = append(gpuctl, p.Values)
		}
	}
	return facts.Compare(rec.OperatorVersion, to.Version, user, gpuctl...)
}

// flagOptions are the flags of an install whose values layers FlagKeys names.
func flagOptions(o InstallOptions) plan.Options {
	return plan.Options{Monitoring: o.Monitoring, Sharing: o.Sharing, MIG: o.MIG, DRA: o.DRA, Precompiled: o.Precompiled}
}

// warnValueChanges reports each change as a warning event, so a CI log shows them.
func warnValueChanges(sink event.Sink, c *bundle.ValueChanges) {
	if c.Empty() {
		return
	}
	for _, l := range c.Lines() {
		sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Message: "values " + c.From + " → " + c.To + ": " + l})
	}
}

// valueChanges judges, before anything is written, each hop's value changes (set in hops[i].values,
// each reported as a warning) and returns those from the installed release to the target: a key
// dropped by a release in between and read again by the target is listed at its hop only.
func (u *Upgrade) valueChanges(rec *record.Record, hops []upgradeHop, target bundle.Bundle, files []plan.Layer, o UpgradeOptions, sink event.Sink) (*bundle.ValueChanges, error) {
	for i := range hops {
		h := &hops[i]
		hr := hopRecord(rec, *h, i > 0, o)
		var err error
		if h.values, err = ValueChanges(hr, h.to, files, o.Set, flagOptions(u.install(hr, h.to.Version, files, o, sink).Options)); err != nil {
			return nil, err
		}
		warnValueChanges(sink, h.values)
	}
	if len(hops) == 1 {
		return hops[0].values, nil
	}
	return ValueChanges(rec, target, files, o.Set, flagOptions(u.install(rec, target.Version, files, o, sink).Options))
}

// hopValueChanges are the value changes of the hops that have any, in order.
func hopValueChanges(hops []upgradeHop) []*bundle.ValueChanges {
	var out []*bundle.ValueChanges
	for _, h := range hops {
		if !h.values.Empty() {
			out = append(out, h.values)
		}
	}
	return out
}
