package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/ui"
)

// upgradeCmd is gpuctl upgrade: its flags and what it runs with.
type upgradeCmd struct {
	streams              Streams
	g                    *globals
	getenv               func(string) string
	o                    engine.UpgradeOptions
	yes, monitoring, dra bool
	acceptValueChanges   bool
	output               string
}

func newUpgradeCmd(streams Streams, g *globals, getenv func(string) string) *cobra.Command {
	u := &upgradeCmd{streams: streams, g: g, getenv: getenv}
	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Move the installed GPU stack to another operator release, keeping the recorded inputs",
		Long: `upgrade applies the target release's CRDs first (server-side, never narrowing them), then upgrades
the releases in install order and waits as install does, then waits until the operator's driver
upgrade has settled on every GPU node. It reuses the inputs recorded at install (--profile, -f, --set);
new -f and --set values are merged over them. Before it writes it shows what will change (releases,
versions, NVIDIA's upgrade notes and a diff of every rendered object that changes) and asks on a
terminal; without one, or with CI set, it needs --yes. Values you set that the target release no longer
reads (with the key NVIDIA replaced each with) and defaults that change for keys you did not set are
listed first; with --yes they must be acknowledged with --accept-value-changes, or nothing is written
(exit 2). NVIDIA supports an upgrade within a major release (26.3) or to the next one only, so a
release two or more majors ahead is reached through the newest release of each major in between
(v25.10.1 → v26.3.3 → v26.7.0): each hop is one upgrade as above, healthy before the next; the whole
path, every hop's value changes included, is shown and confirmed once, before the first write. An
interrupted path goes on from the release the stack runs when run again. On OpenShift OLM's channel
graph decides the path. A downgrade needs --force. --dry-run shows the
same preview (with -o json, the plan too) and changes nothing, not even the install lock.`,
		Example: `  gpuctl upgrade                                   # to gpuctl's default operator release
  gpuctl upgrade --operator-version v26.7.0 --yes
  gpuctl upgrade --operator-version v26.7.0 --dry-run -o json   # what it would change; nothing written
  gpuctl upgrade --set driver.version=580.95.05 --yes  # same release, new values`,
		Args: cobra.NoArgs,
		RunE: u.run,
	}
	u.addFlags(cmd.Flags())
	return cmd
}

// addFlags declares upgrade's flags.
func (u *upgradeCmd) addFlags(f *pflag.FlagSet) {
	o := &u.o
	f.StringVar(&o.OperatorVersion, "operator-version", "", "GPU Operator release to move to (default: gpuctl's default release; see gpuctl version)")
	f.StringArrayVarP(&o.ValuesFiles, "values", "f", nil, "values file merged over the recorded inputs; repeatable, later wins")
	f.StringArrayVar(&o.Set, "set", nil, "set a value over the recorded inputs (Helm syntax); repeatable")
	f.BoolVarP(&u.yes, "yes", "y", false, "do not ask; required without a terminal or when CI is set")
	f.BoolVar(&u.o.DryRun, "dry-run", false, "show what the upgrade would change (releases, versions, notes, a diff of every object that changes) and change nothing")
	f.BoolVar(&u.acceptValueChanges, "accept-value-changes", false, "go on although the target release does not read some values you set or changes defaults you did not set (the preview lists them); needed with --yes when there are any")
	f.BoolVar(&o.Force, "force", false, "allow moving to an older operator release; and "+forceHelp)
	f.StringVar(&o.Registry, "registry", "", "pull every image from this mirror instead of the recorded one (default: the install's --registry)")
	f.StringArrayVar(&o.ImagePullSecrets, "image-pull-secret", nil, "Secrets to pull every image with, instead of the recorded ones; repeatable")
	f.StringSliceVar(&o.SkipChecks, "skip-check", nil, "a preflight check not to run, by ID; repeatable or comma-separated")
	f.StringArrayVar(&o.Sharing, "sharing", nil, sharingHelp+" (default: as recorded)")
	f.StringArrayVar(&o.MIG, "mig", nil, migHelp+" (default: as recorded)")
	f.BoolVar(&u.monitoring, "monitoring", false, "turn monitoring on (ServiceMonitors, Grafana dashboard, GPU alerts), or off with --monitoring=false (default: as recorded at install)")
	f.StringVar(&o.Precompiled, "precompiled", "", precompiledHelp+"; none takes it off (default: as recorded)")
	f.BoolVar(&u.dra, "dra", false, "switch to the DRA stack (GPUCluster), or back to the ClusterPolicy with --dra=false (default: as recorded at install)")
	f.DurationVar(&o.Timeout, "timeout", engine.DefaultUpgradeTimeout, "how long the upgrade may take, driver upgrades included; through more than one major, each major's step")
	f.DurationVar(&o.WaitForLock, "wait-for-lock", 0, "how long to wait while another gpuctl run holds the install lock (default 0: exit 6 at once, naming it)")
	f.StringVarP(&u.output, "output", "o", "text", "result format: text, json, yaml")
}

// run judges the inputs, runs the upgrade (asking first where it must), prints its result, and
// turns the upgrade's error into the command's exit.
func (u *upgradeCmd) run(cmd *cobra.Command, _ []string) error {
	if err := u.validate(cmd); err != nil {
		return err
	}
	clients, err := u.g.clientsReachedLater()
	if err != nil {
		return err
	}
	progress, err := u.g.progressRenderer(u.streams.Err, u.getenv)
	if err != nil {
		return err
	}
	defer progress.Close()
	c := &upgradeConfirmer{streams: u.streams, getenv: u.getenv, progress: progress, yes: u.yes,
		ask: interactive(u.streams, u.getenv) && !u.yes}
	if u.o.DryRun {
		c.yes, c.ask = true, false
	}
	// Without --yes the upgrade goes on only when the user answers the prompt, which shows the value
	// changes (so answering acknowledges them), or it is refused for want of --yes after the preview;
	// --yes alone does not acknowledge them, so the engine refuses before anything is written.
	u.o.AcceptValueChanges = u.acceptValueChanges || !u.yes
	res, err := (&engine.Upgrade{Clients: clients, Reach: clients.Reach, Options: u.o, Sink: progress, Confirm: c.confirm, Version: gpuctlVersion(),
		Stdin: u.streams.In, Getenv: u.getenv}).Run(cmd.Context())
	progress.Close()
	if res != nil {
		if werr := u.writeResult(res, clients.Namespace, err); werr != nil {
			return werr
		}
	}
	return upgradeExit(err, c.refused, c.values)
}

// validate refuses a mistake in upgrade's flags before anything is read from the cluster, and takes
// --monitoring only when it was given (unset keeps what the install recorded).
func (u *upgradeCmd) validate(cmd *cobra.Command) error {
	if err := outputFlag(u.output, "text", "json", "yaml"); err != nil {
		return err
	}
	if err := (&preflight.Runner{Skip: u.o.SkipChecks}).Validate(); err != nil {
		return usageError{err}
	}
	if u.o.Force {
		u.o.SkipChecks = append(u.o.SkipChecks, preflight.GPUWorkCheck)
	}
	if err := validateTimeout(u.o.Timeout); err != nil {
		return err
	}
	if err := validateWaitForLock(u.o.WaitForLock); err != nil {
		return err
	}
	if cmd.Flags().Changed("monitoring") {
		u.o.Monitoring = &u.monitoring
	}
	if cmd.Flags().Changed("dra") {
		u.o.DRA = &u.dra
	}
	if u.o.Precompiled != engine.PrecompiledNone {
		if err := plan.CheckPrecompiled(u.o.Precompiled); err != nil {
			return usageError{err}
		}
	}
	vo := engine.InstallOptions{ValuesFiles: u.o.ValuesFiles, Set: u.o.Set, OperatorVersion: u.o.OperatorVersion,
		Registry: u.o.Registry, ImagePullSecrets: u.o.ImagePullSecrets}
	return validateValuesOptions(&vo)
}

// writeResult writes the upgrade's result as -o asks; as text, only a finished install's summary and
// each GPU node's driver upgrade.
func (u *upgradeCmd) writeResult(res *engine.UpgradeResult, namespace string, runErr error) error {
	return writeResult(u.streams.Out, u.output, res, func() error {
		style := ui.DetectStyle(u.streams.Out, u.getenv)
		if res.DryRun && runErr == nil && len(res.Hops) > 0 {
			return ui.PrintUpgradePath(u.streams.Out, hopPreviews(res), style)
		}
		if res.DryRun && runErr == nil && res.Preview != nil {
			return ui.PrintUpgradePreview(u.streams.Out, res.Preview, style)
		}
		if runErr != nil || res.Install == nil {
			return nil
		}
		if len(res.Hops) > 0 {
			if err := ui.PrintUpgradePathDone(u.streams.Out, res.Path, len(res.Hops)); err != nil {
				return err
			}
		}
		if err := ui.PrintInstallResult(u.streams.Out, res.Install, namespace, ui.DetectStyle(u.streams.Out, u.getenv)); err != nil {
			return err
		}
		for _, n := range res.Install.GPUNodes {
			state := res.DriverUpgrades[n]
			if state == "" {
				state = "no driver upgrade"
			}
			fmt.Fprintf(u.streams.Out, "node %s: %s\n", n, state)
		}
		return nil
	})
}

// upgradeConfirmer shows the upgrade's preview and decides whether it goes on: at once with --yes or
// when nothing changes, by asking on a terminal, and never without one (refused records that).
type upgradeConfirmer struct {
	streams  Streams
	getenv   func(string) string
	progress *ui.Progress
	yes, ask bool
	refused  bool
	// values: the refused preview lists value changes, which --yes alone does not acknowledge.
	values bool
}

// confirm is engine.Upgrade's Confirm: one preview per hop of the upgrade's path, asked once.
func (c *upgradeConfirmer) confirm(previews []*engine.UpgradePreview) bool {
	c.progress.Close()
	style := ui.DetectStyle(c.streams.Err, c.getenv)
	if len(previews) > 1 {
		_ = ui.PrintUpgradePath(c.streams.Err, previews, style)
	} else {
		for _, p := range previews {
			_ = ui.PrintUpgradePreview(c.streams.Err, p, style)
		}
	}
	changed, values := false, false
	for _, p := range previews {
		changed = changed || p.Changed()
		values = values || !p.Values.Empty()
	}
	if c.yes || !changed {
		return true
	}
	if !c.ask {
		c.refused, c.values = true, values
		return false
	}
	question := "Upgrade?"
	if len(previews) > 1 {
		question = fmt.Sprintf("Upgrade in %d steps?", len(previews))
	}
	return confirm(c.streams, c.getenv, false, "gpuctl upgrade", question) == nil
}

// hopPreviews are the previews of an upgrade's hops, in order.
func hopPreviews(res *engine.UpgradeResult) []*engine.UpgradePreview {
	out := make([]*engine.UpgradePreview, 0, len(res.Hops))
	for _, h := range res.Hops {
		if h.Preview != nil {
			out = append(out, h.Preview)
		}
	}
	return out
}

// upgradeExit turns the upgrade's error into the command's: a refusal without a terminal, unacknowledged
// value changes and a move with no supported upgrade path are usage errors, nothing installed and a stack that did not settle have their own exit codes.
func upgradeExit(err error, refused, valueChanges bool) error {
	var stuck *health.StuckError
	var values *engine.ValueChangesError
	var path *engine.PathError
	switch {
	case errors.As(err, &values), errors.As(err, &path):
		return usageError{err}
	case errors.Is(err, engine.ErrNotConfirmed) && refused && valueChanges:
		return usageError{errors.New("gpuctl upgrade changes the cluster and asks first; without a terminal (or with CI set) it needs --yes, and " +
			engine.AcceptValueChangesFlag + " for the value changes listed above. Nothing was changed")}
	case errors.Is(err, engine.ErrNotConfirmed) && refused:
		return usageError{errors.New("gpuctl upgrade changes the cluster and asks first; without a terminal (or with CI set) it needs --yes. Nothing was changed")}
	case errors.Is(err, engine.ErrNotConfirmed):
		return fmt.Errorf("not confirmed: nothing was changed")
	case errors.Is(err, engine.ErrNotInstalled):
		return notInstalledError{err}
	case errors.As(err, &stuck):
		return notReadyError{err}
	}
	return err
}
