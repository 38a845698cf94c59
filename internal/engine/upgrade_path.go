package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/distro"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
)

// nvidiaUpgradeRule is NVIDIA's rule the path follows, as its platform-support page states it
// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/platform-support.html, GPU
// Operator v26.7.0: "Upgrades are only supported within a major release or to the next major release").
const nvidiaUpgradeRule = "NVIDIA supports an upgrade within a major release or to the next one only"

// PathError refuses a move with no supported upgrade path: a downgrade (NVIDIA's documentation
// describes upgrades only), or a move from or to a major release gpuctl's catalog does not know (it
// cannot tell which majors lie between). --force makes such a move in one hop. It is an input mistake
// (exit 2), refused before anything is written.
type PathError struct {
	From, To string
	// Reason says why there is no path.
	Reason string
}

func (e *PathError) Error() string {
	return fmt.Sprintf("no supported upgrade path %s → %s: %s", e.From, e.To, e.Reason)
}

// Unwrap makes a PathError an input mistake.
func (e *PathError) Unwrap() error { return plan.ErrInput }

// UpgradePath is the operator releases an upgrade from `from` to `to` goes through, `to` last and
// `from` left out; none for the same release. A GPU Operator major release is the year.month pair
// of its version (bundle.Major), and NVIDIA supports an upgrade within a major or to the next one
// only, so a move two or more majors ahead (in the order of the catalog's majors) goes through the
// newest catalog release of each major in between: v25.10.1 → v26.7.0 is v26.3.3, v26.7.0. A
// downgrade and a major the catalog does not know are refused with a *PathError unless force, which
// moves straight to `to`. An install an older gpuctl recorded without a version ("") moves straight
// too: there is nothing to judge it by.
func UpgradePath(from, to string, force bool) ([]string, error) {
	t, err := semver.NewVersion(to)
	if err != nil {
		return nil, fmt.Errorf("%w: --operator-version %q: %w", plan.ErrInput, to, err)
	}
	if from == "" {
		return []string{to}, nil
	}
	f, err := semver.NewVersion(from)
	if err != nil {
		return nil, fmt.Errorf("installed operator release %q: %w", from, err)
	}
	switch {
	case t.Equal(f):
		return nil, nil
	case t.LessThan(f) && force:
		return []string{to}, nil
	case t.LessThan(f):
		return nil, &PathError{From: from, To: to, Reason: "it is a downgrade, and " + nvidiaUpgradeRule +
			"; gpuctl does not downgrade without --force, which moves there in one step (the newer release's CRDs stay: gpuctl never narrows them)"}
	}
	majors := bundle.Majors()
	index := func(v string) int {
		m, _ := bundle.Major(v)
		return slices.IndexFunc(majors, func(b bundle.Bundle) bool { mb, _ := bundle.Major(b.Version); return mb == m })
	}
	fi, ti := index(from), index(to)
	if fi < 0 || ti < 0 {
		unknown, _ := bundle.Major(from)
		if fi >= 0 {
			unknown, _ = bundle.Major(to)
		}
		if force {
			return []string{to}, nil
		}
		return nil, &PathError{From: from, To: to, Reason: fmt.Sprintf("gpuctl knows the majors %s, not %s, so it cannot tell which lie between (%s); --force moves there in one step",
			strings.Join(majorNames(majors), ", "), unknown, nvidiaUpgradeRule)}
	}
	var path []string
	for _, b := range majors[min(fi+1, ti):ti] {
		path = append(path, b.Version)
	}
	return append(path, to), nil
}

// majorNames are the majors of releases, as bundle.Major names them.
func majorNames(releases []bundle.Bundle) []string {
	var out []string
	for _, b := range releases {
		m, _ := bundle.Major(b.Version)
		out = append(out, m)
	}
	return out
}

// upgradeHop is one move of an upgrade's path: one run of the install pipeline (CRDs first, then one
// Helm revision of each release that changes, then the waits), as a one-hop upgrade is.
type upgradeHop struct {
	// from is the release the stack runs before the hop.
	from   string
	to     bundle.Bundle
	change plan.VersionChange
	// values are the hop's value changes (ValueChanges from `from` to `to`).
	values *bundle.ValueChanges
}

// upgradeHops are the hops of an upgrade of rec's stack to target. On OpenShift OLM installs the
// operator, and its channel graph (each CSV's replaces and skipRange) decides the path: gpuctl moves
// the Subscription in one hop there. An upgrade that was interrupted halfway through a hop (the record
// names the release that hop moved to) first finishes that hop, a pass at the same release that waits
// until the stack is healthy, when the next hop crosses a major: NVIDIA's path goes from a healthy
// stack. A failed run is not redone first: its cause may be what the upgrade fixes.
func upgradeHops(rec *record.Record, target bundle.Bundle, force bool) ([]upgradeHop, error) {
	var path []string
	if distro.Get(rec.Distribution).OLM {
		path = []string{target.Version}
	} else {
		var err error
		if path, err = UpgradePath(rec.OperatorVersion, target.Version, force); err != nil {
			return nil, err
		}
	}
	if len(path) == 0 || path[0] == rec.OperatorVersion {
		// The same release: the recorded inputs with the new ones over them.
		path = []string{target.Version}
	} else if finishFirst(rec, path[0]) {
		path = append([]string{rec.OperatorVersion}, path...)
	}
	var hops []upgradeHop
	from := rec.OperatorVersion
	for _, v := range path {
		b, err := bundle.Get(v)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", plan.ErrInput, err)
		}
		change, err := plan.CheckVersions(from, v, force)
		if err != nil {
			return nil, err
		}
		hops = append(hops, upgradeHop{from: from, to: b, change: change})
		from = v
	}
	return hops, nil
}

// finishFirst reports whether an interrupted upgrade's hop is finished before the hop to next.
func finishFirst(rec *record.Record, next string) bool {
	if rec.Command != "upgrade" || rec.Result != "interrupted" {
		return false
	}
	if _, err := bundle.Get(rec.OperatorVersion); err != nil {
		return false
	}
	cur, err1 := bundle.Major(rec.OperatorVersion)
	nm, err2 := bundle.Major(next)
	return err1 == nil && err2 == nil && cur != nm
}

// pathOf is the releases of hops, the installed one first ("" left out).
func pathOf(hops []upgradeHop) []string {
	var out []string
	if hops[0].from != "" {
		out = append(out, hops[0].from)
	}
	for _, h := range hops {
		if len(out) == 0 || out[len(out)-1] != h.to.Version {
			out = append(out, h.to.Version)
		}
	}
	return out
}
