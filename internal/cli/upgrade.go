package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/ui"
)

func newUpgradeCmd(streams Streams, g *globals, getenv func(string) string) *cobra.Command {
	var o engine.UpgradeOptions
	var yes, monitoring bool
	var output string
	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Move the installed GPU stack to another operator release, keeping the recorded inputs",
		Long: `upgrade applies the target release's CRDs first (server-side, never narrowing them), then upgrades
the releases in install order and waits as install does, then waits until the operator's driver
upgrade has settled on every GPU node. It reuses the inputs recorded at install (--profile, -f, --set);
new -f and --set values are merged over them. Before it writes it shows what will change (releases,
versions, NVIDIA's upgrade notes and a diff of every rendered object that changes) and asks on a
terminal; without one, or with CI set, it needs --yes. A downgrade needs --force.`,
		Example: `  gpuctl upgrade                                   # to gpuctl's default operator release
  gpuctl upgrade --operator-version v26.7.0 --yes
  gpuctl upgrade --set driver.version=580.95.05 --yes  # same release, new values`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFlag(output, "text", "json", "yaml"); err != nil {
				return err
			}
			if err := (&preflight.Runner{Skip: o.SkipChecks}).Validate(); err != nil {
				return usageError{err}
			}
			if err := validateTimeout(o.Timeout); err != nil {
				return err
			}
			if err := validateWaitForLock(o.WaitForLock); err != nil {
				return err
			}
			if cmd.Flags().Changed("monitoring") {
				o.Monitoring = &monitoring
			}
			vo := engine.InstallOptions{ValuesFiles: o.ValuesFiles, Set: o.Set, OperatorVersion: o.OperatorVersion,
				Registry: o.Registry, ImagePullSecrets: o.ImagePullSecrets}
			if err := validateValuesOptions(&vo); err != nil {
				return err
			}
			clients, err := g.clientsReachedLater()
			if err != nil {
				return err
			}
			progress, err := g.progressRenderer(streams.Err, getenv)
			if err != nil {
				return err
			}
			defer progress.Close()
			ask := interactive(streams, getenv) && !yes
			refused := false
			confirmFn := func(p *engine.UpgradePreview) bool {
				progress.Close()
				_ = ui.PrintUpgradePreview(streams.Err, p, ui.DetectStyle(streams.Err, getenv))
				if yes || !p.Changed() {
					return true
				}
				if !ask {
					refused = true
					return false
				}
				return confirm(streams, getenv, false, "gpuctl upgrade", "Upgrade?") == nil
			}
			res, err := (&engine.Upgrade{Clients: clients, Reach: clients.Reach, Options: o, Sink: progress, Confirm: confirmFn, Version: gpuctlVersion(),
				Stdin: streams.In, Getenv: getenv}).Run(cmd.Context())
			progress.Close()
			if res != nil {
				werr := writeResult(streams.Out, output, res, func() error {
					if err != nil || res.Install == nil {
						return nil
					}
					if werr := ui.PrintInstallResult(streams.Out, res.Install, clients.Namespace, ui.DetectStyle(streams.Out, getenv)); werr != nil {
						return werr
					}
					for _, n := range res.Install.GPUNodes {
						state := res.DriverUpgrades[n]
						if state == "" {
							state = "no driver upgrade"
						}
						fmt.Fprintf(streams.Out, "node %s: %s\n", n, state)
					}
					return nil
				})
				if werr != nil {
					return werr
				}
			}
			var stuck *health.StuckError
			switch {
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
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.OperatorVersion, "operator-version", "", "GPU Operator release to move to (default: gpuctl's default release; see gpuctl version)")
	f.StringArrayVarP(&o.ValuesFiles, "values", "f", nil, "values file merged over the recorded inputs; repeatable, later wins")
	f.StringArrayVar(&o.Set, "set", nil, "set a value over the recorded inputs (Helm syntax); repeatable")
	f.BoolVarP(&yes, "yes", "y", false, "do not ask; required without a terminal or when CI is set")
	f.BoolVar(&o.Force, "force", false, "allow moving to an older operator release")
	f.StringVar(&o.Registry, "registry", "", "pull every image from this mirror instead of the recorded one (default: the install's --registry)")
	f.StringArrayVar(&o.ImagePullSecrets, "image-pull-secret", nil, "Secrets to pull every image with, instead of the recorded ones; repeatable")
	f.StringSliceVar(&o.SkipChecks, "skip-check", nil, "a preflight check not to run, by ID; repeatable or comma-separated")
	f.BoolVar(&monitoring, "monitoring", false, "turn monitoring on (ServiceMonitors, Grafana dashboard, GPU alerts), or off with --monitoring=false (default: as recorded at install)")
	f.DurationVar(&o.Timeout, "timeout", 30*time.Minute, "how long the whole upgrade may take, driver upgrades included")
	f.DurationVar(&o.WaitForLock, "wait-for-lock", 0, "how long to wait while another gpuctl run holds the install lock (default 0: exit 6 at once, naming it)")
	f.StringVarP(&output, "output", "o", "text", "result format: text, json, yaml")
	return cmd
}
