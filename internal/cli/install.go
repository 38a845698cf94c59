package cli

import (
	"errors"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/ui"
)

// installCmd is gpuctl install: its flags and what it runs with.
type installCmd struct {
	streams     Streams
	g           *globals
	getenv      func(string) string
	o           engine.InstallOptions
	output      string
	interactive bool
	force       bool
}

func newInstallCmd(streams Streams, g *globals, getenv func(string) string) *cobra.Command {
	in := &installCmd{streams: streams, g: g, getenv: getenv}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Detect, taint GPU nodes, install NFD and the GPU Operator, and wait until every GPU node is validated",
		Example: `  gpuctl install                         # detect everything, choose the profile
  gpuctl install --profile gke -f my-values.yaml --set driver.enabled=false
  gpuctl install --dry-run -o json        # the plan, for review in CI`,
		Args: cobra.NoArgs,
		RunE: in.run,
	}
	in.addFlags(cmd.Flags())
	return cmd
}

// forceHelp is --force's help about GPU work, the same on install and upgrade.
const forceHelp = "go on although the run stops the pods holding GPUs on the nodes it repartitions (--mig), re-advertises (--sharing) or switches between the device plugin and DRA (--dra): " +
	"skips preflight's " + preflight.GPUWorkCheck + " check, which refuses such a run (exit 5) naming the pods (docs/troubleshooting.md)"

// installProfileHelp is --profile's help where the cluster is always read (install, check --pre).
const installProfileHelp = "values profile (default: chosen from the detected distribution; see gpuctl profiles list)"

// addFlags declares install's flags: the render flags (renderflags.go), then its own.
func (in *installCmd) addFlags(f *pflag.FlagSet) {
	o := &in.o
	addRenderFlags(f, o, installProfileHelp)
	addLicensingFlags(f, &o.Licensing)
	f.StringSliceVar(&o.SkipChecks, "skip-check", nil, "a preflight check not to run, by ID; repeatable or comma-separated. IDs: "+checkIDs())
	f.BoolVar(&o.DryRun, "dry-run", false, "print the plan and change nothing")
	f.DurationVar(&o.Timeout, "timeout", plan.DefaultTimeout, "how long the whole install may take")
	f.DurationVar(&o.WaitForLock, "wait-for-lock", 0, "how long to wait while another gpuctl run holds the install lock (default 0: exit 6 at once, naming it)")
	f.StringVarP(&in.output, "output", "o", "text", "result format: text, json, yaml")
	f.BoolVar(&in.interactive, "interactive", false, "run the wizard (gpuctl wizard) with these flags as its preset choices")
	f.BoolVar(&in.force, "force", false, forceHelp)
	f.BoolVar(&o.Adopt, "adopt", false, "take over the GPU operator Helm release "+plan.OperatorRelease+" that gpuctl did not install (NVIDIA's chart, installed with helm), keeping its values under -f and --set; "+
		"without it such a release is refused (exit 5); --dry-run lists which of its values change")
}

// run hands over to the wizard with --interactive; else it judges the inputs, runs the install and
// prints the plan (--dry-run) or the result, and turns the install's error into the command's exit.
func (in *installCmd) run(cmd *cobra.Command, _ []string) error {
	if in.interactive {
		return runWizard(cmd.Context(), in.streams, in.g, in.getenv, in.o, wizardFlags{save: "gpuctl-install.yaml"})
	}
	if err := outputFlag(in.output, "text", "json", "yaml"); err != nil {
		return err
	}
	if err := validateInstallInputs(&in.o); err != nil {
		return err
	}
	if in.force {
		in.o.SkipChecks = append(in.o.SkipChecks, preflight.GPUWorkCheck)
	}
	clients, err := in.g.clientsReachedLater()
	if err != nil {
		return err
	}
	progress, err := in.g.progressRenderer(in.streams.Err, in.getenv)
	if err != nil {
		return err
	}
	defer progress.Close()
	res, err := (&engine.Install{Clients: clients, Reach: clients.Reach, Options: in.o, Sink: progress, Stdin: in.streams.In, Getenv: in.getenv, Version: gpuctlVersion()}).Run(cmd.Context())
	progress.Close()
	if in.o.DryRun && res != nil && res.Plan != nil && err == nil {
		return writeResult(in.streams.Out, in.output, res.Plan, func() error {
			return ui.PrintPlan(in.streams.Out, res.Plan, ui.DetectStyle(in.streams.Out, in.getenv))
		})
	}
	if res != nil && (res.Plan != nil || res.Preflight != nil) {
		if werr := in.writeResult(res, clients.Namespace, err); werr != nil {
			return werr
		}
	}
	return installExit(res, err)
}

// writeResult writes the install's result as -o asks; as text, only a finished install's summary.
func (in *installCmd) writeResult(res *engine.InstallResult, namespace string, runErr error) error {
	return writeResult(in.streams.Out, in.output, res, func() error {
		if runErr != nil {
			return nil
		}
		return ui.PrintInstallResult(in.streams.Out, res, namespace, ui.DetectStyle(in.streams.Out, in.getenv))
	})
}

// installExit turns the install's error into the command's: a stack that did not settle is not
// ready, and a failure before there was any result is detection's.
func installExit(res *engine.InstallResult, err error) error {
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
