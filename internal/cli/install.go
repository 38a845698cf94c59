package cli

import (
	"errors"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/ui"
)

func newInstallCmd(streams Streams, g *globals, getenv func(string) string) *cobra.Command {
	var o engine.InstallOptions
	var output string
	var interactive bool
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Detect, taint GPU nodes, install NFD and the GPU Operator, and wait until every GPU node is validated",
		Example: `  gpuctl install                         # detect everything, choose the profile
  gpuctl install --profile gke -f my-values.yaml --set driver.enabled=false
  gpuctl install --dry-run -o json        # the plan, for review in CI`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interactive {
				return runWizard(cmd.Context(), streams, g, getenv, o, wizardFlags{save: "gpuctl-install.yaml"})
			}
			if err := outputFlag(output, "text", "json", "yaml"); err != nil {
				return err
			}
			if err := validateInstallInputs(&o); err != nil {
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
			res, err := (&engine.Install{Clients: clients, Reach: clients.Reach, Options: o, Sink: progress, Stdin: streams.In, Getenv: getenv, Version: gpuctlVersion()}).Run(cmd.Context())
			progress.Close()
			if o.DryRun && res != nil && res.Plan != nil && err == nil {
				return writeResult(streams.Out, output, res.Plan, func() error {
					return ui.PrintPlan(streams.Out, res.Plan, ui.DetectStyle(streams.Out, getenv))
				})
			}
			if res != nil && (res.Plan != nil || res.Preflight != nil) {
				werr := writeResult(streams.Out, output, res, func() error {
					if err != nil {
						return nil
					}
					return ui.PrintInstallResult(streams.Out, res, clients.Namespace, ui.DetectStyle(streams.Out, getenv))
				})
				if werr != nil {
					return werr
				}
			}
			var stuck *health.StuckError
			if errors.As(err, &stuck) {
				return notReadyError{err}
			}
			if err != nil && res == nil {
				// Detection is the only thing before the plan; it failing changed nothing, and the
				// reason it failed is what check --pre reports as a failed check.
				return detectionFailed(err)
			}
			return err
		},
	}
	f := cmd.Flags()
	addInstallFlags(f, &o, "values profile (default: chosen from the detected distribution; see gpuctl profiles list)")
	f.StringSliceVar(&o.SkipChecks, "skip-check", nil, "a preflight check not to run, by ID; repeatable or comma-separated. IDs: "+checkIDs())
	f.BoolVar(&o.DryRun, "dry-run", false, "print the plan and change nothing")
	f.BoolVar(&o.TolerateExistingTaints, "tolerate-existing-taints", false, "tolerate the GPU nodes' own NoSchedule/NoExecute taints in the NFD worker and the operands (without it, such a taint fails preflight)")
	f.DurationVar(&o.Timeout, "timeout", 20*time.Minute, "how long the whole install may take")
	f.DurationVar(&o.WaitForLock, "wait-for-lock", 0, "how long to wait while another gpuctl run holds the install lock (default 0: exit 6 at once, naming it)")
	f.StringVarP(&output, "output", "o", "text", "result format: text, json, yaml")
	f.BoolVar(&interactive, "interactive", false, "run the wizard (gpuctl wizard) with these flags as its preset choices")
	return cmd
}

// addLicensingFlags adds the NVIDIA AI Enterprise inputs. The NGC API key is taken from a file,
// standard input or an environment variable, never from a flag's value, which would land in shell
// history and process listings.
func addLicensingFlags(f *pflag.FlagSet, l *plan.Licensing) {
	f.StringVar(&l.NLSTokenFile, "nls-token-file", "", "NVIDIA AI Enterprise: the NLS client configuration token file (client_configuration_token.tok)")
	f.StringVar(&l.GriddConfFile, "gridd-conf-file", "", "NVIDIA AI Enterprise: the gridd.conf file (may be empty)")
	f.StringVar(&l.NGCAPIKeyFile, "ngc-api-key-file", "", "NVIDIA AI Enterprise: file holding the NGC API key, or - for standard input")
	f.StringVar(&l.NGCAPIKeyEnv, "ngc-api-key-env", "NGC_API_KEY", "NVIDIA AI Enterprise: environment variable holding the NGC API key")
}

// addValuesFlags adds the flags that choose values: --profile, -f and --set.
func addValuesFlags(f *pflag.FlagSet, o *engine.InstallOptions, profileHelp string) {
	f.StringVar(&o.Profile, "profile", "", profileHelp)
	f.StringArrayVarP(&o.ValuesFiles, "values", "f", nil, "values file in the gpu-operator chart's keys (NFD under node-feature-discovery:); repeatable, later wins")
	f.StringArrayVar(&o.Set, "set", nil, "set a value (Helm syntax, e.g. driver.enabled=false); repeatable, wins over -f")
	addImageFlags(f, o)
}
