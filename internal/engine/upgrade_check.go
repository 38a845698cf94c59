package engine

import (
	"context"
	"strings"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/distro"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/record"
)

// upgradeValuesCheck is the ID of check --pre's result about an installed stack's values.
const upgradeValuesCheck = "upgrade-values"

// upgradeValues is `check --pre --operator-version X` on a cluster gpuctl installed another release
// on: what gpuctl upgrade to X would list (ValueChanges), with -f and --set over the recorded inputs as
// upgrade merges them. A warning, never a failure: upgrade itself asks for the acknowledgement. ok is
// false when there is no such install, or the record cannot be read (the other checks say why).
func (c *Check) upgradeValues(ctx context.Context) (preflight.Result, bool) {
	b, err := bundle.Get(c.Options.OperatorVersion)
	if err != nil {
		return preflight.Result{}, false
	}
	rec, err := record.Read(ctx, c.Clients.Kube)
	if err != nil || rec == nil || rec.Uninstalled || rec.OperatorVersion == "" || rec.OperatorVersion == b.Version {
		return preflight.Result{}, false
	}
	files, err := parseValueLayers(InstallOptions{ValuesFiles: c.Options.ValuesFiles})
	if err != nil {
		return preflight.Result{}, false
	}
	// The flags as upgrade would take them (Upgrade.install): the ones given over the recorded ones.
	uo := UpgradeOptions{Sharing: c.Options.Sharing, MIG: c.Options.MIG, Precompiled: c.Options.Precompiled}
	if c.Options.Monitoring {
		uo.Monitoring = &c.Options.Monitoring
	}
	if c.Options.DRA {
		uo.DRA = &c.Options.DRA
	}
	flags := flagOptions((&Upgrade{Clients: c.Clients}).install(rec, b.Version, files, uo, nil).Options)
	changes, err := ValueChanges(rec, b, files, c.Options.Set, flags)
	if err != nil {
		return preflight.Result{}, false
	}
	r := preflight.Result{ID: upgradeValuesCheck, Category: "upgrade", Status: preflight.StatusPass,
		Description: "the values you set are read by " + b.Version + " as by the installed " + rec.OperatorVersion + ", and no default changes under them",
		Message:     "nothing to acknowledge for gpuctl upgrade --operator-version " + b.Version}
	if !changes.Empty() {
		r.Status = preflight.StatusWarn
		r.Message = changes.Summary() + ":\n" + strings.Join(changes.Lines(), "\n")
		r.Hint = "gpuctl upgrade --operator-version " + b.Version + " lists them too; with --yes it needs " + AcceptValueChangesFlag + " (docs/troubleshooting.md#upgrades)"
	}
	// Two or more majors ahead, upgrade goes through the majors between and lists each hop's changes;
	// these are the net ones, from the installed release to the target.
	if path, err := UpgradePath(rec.OperatorVersion, b.Version, false); err == nil && len(path) > 1 && !distro.Get(rec.Distribution).OLM {
		via := "gpuctl upgrade goes " + rec.OperatorVersion + " → " + strings.Join(path, " → ") + " (" + nvidiaUpgradeRule + ") and lists each step's value changes"
		if r.Hint == "" {
			r.Hint = via
		} else {
			r.Hint = via + "; " + r.Hint
		}
	}
	return r, true
}
