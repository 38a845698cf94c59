package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/lock"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/runner"
	"github.com/gpuctl/gpuctl/internal/ui"
)

// Streams are the standard streams: results go to Out, progress and diagnostics to Err.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// Exit codes.
const (
	ExitOK = 0
	// ExitError: the command failed.
	ExitError = 1
	// ExitUsage: the command line was wrong.
	ExitUsage = 2
	// ExitUnsupported: gpuctl does not support this cluster (yet); nothing was changed.
	ExitUnsupported = 3
	// ExitNotReady: the install ran but the GPU stack did not become ready in time.
	ExitNotReady = 4
	// ExitPreflight: a preflight check failed; nothing was changed.
	ExitPreflight = 5
	// ExitLocked: another writer is at work: a gpuctl run holds the install lock (it is named;
	// nothing was changed), or a Helm operation gpuctl did not start is in progress on one of its
	// releases (release.BusyError; that release was not changed).
	ExitLocked = 6
	// ExitNotInstalled: status found nothing gpuctl installed (no install record, no gpu-operator release).
	ExitNotInstalled = 7
	// ExitVerifyFailed: gpuctl verify: a GPU node did not pass (failed, unschedulable or timed out).
	ExitVerifyFailed = 8
	// ExitUnreachable: the Kubernetes API server could not be reached (refused, no answer within the
	// request timeout, no route, TLS failed); nothing was changed.
	ExitUnreachable = 9
	// ExitInterrupted: Ctrl-C.
	ExitInterrupted = 130
)

// globals are the flags every command shares.
type globals struct {
	kube     *genericclioptions.ConfigFlags
	config   string
	progress string
	// ctx is the run's context (Ctrl-C cancels it), for the first request clients makes.
	ctx context.Context
}

// Run runs gpuctl with args and returns the process exit code. getenv reads the environment (for
// GPUCTL_* settings and NO_COLOR).
func Run(ctx context.Context, streams Streams, args []string, getenv func(string) string) int {
	return RunAs(ctx, "gpuctl", streams, args, getenv)
}

// RunAs is Run for a program of another name: installed as kubectl-gpu (krew), gpuctl runs as the
// kubectl plugin `kubectl gpu` and its help and examples say so.
func RunAs(ctx context.Context, program string, streams Streams, args []string, getenv func(string) string) int {
	g := &globals{kube: genericclioptions.NewConfigFlags(true), ctx: ctx}
	ns := plan.DefaultNamespace
	g.kube.Namespace = &ns
	root := newRoot(ctx, streams, g, getenv)
	if name, ok := strings.CutPrefix(program, "kubectl-"); ok && name != "" {
		display := "kubectl " + strings.ReplaceAll(name, "_", "-")
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: display}
		for _, c := range root.Commands() {
			c.Example = strings.ReplaceAll(c.Example, "gpuctl ", display+" ")
		}
	}
	root.SetArgs(args)
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.Err)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	return report(streams.Err, err)
}

func newRoot(ctx context.Context, streams Streams, g *globals, getenv func(string) string) *cobra.Command {
	root := &cobra.Command{
		Use:   "gpuctl",
		Short: "Take a Kubernetes cluster from \"GPU nodes joined\" to \"GPUs validated and schedulable\"",
		Long: `gpuctl detects the distribution and the GPU nodes, chooses a values profile, taints the GPU nodes,
installs Node Feature Discovery and the NVIDIA GPU Operator as Helm releases from charts built into the
binary, and waits until the validator has passed on every GPU node.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applySettings(cmd, g.config, getenv); err != nil {
				return err
			}
			return validateNamespace(*g.kube.Namespace)
		},
	}
	// A flag's value that does not parse (--timeout forever) is a usage error, as the same value from
	// GPUCTL_TIMEOUT or the config file is.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	kube := kubeFlags(root, g)
	root.SetUsageFunc(usageFunc(kube))
	root.PersistentFlags().StringVar(&g.config, "config", "", "config file (default $XDG_CONFIG_HOME/gpuctl/config.yaml); flags win over it, GPUCTL_* environment variables over the file")
	root.PersistentFlags().StringVar(&g.progress, "progress", "auto", "progress on stderr: auto (spinner on a terminal, plain lines otherwise), plain, json")
	root.AddCommand(
		newInstallCmd(streams, g, getenv),
		newWizardCmd(streams, g, getenv),
		newCheckCmd(streams, g, getenv),
		newDetectCmd(streams, g),
		newProfilesCmd(streams),
		newTemplateCmd(streams, g),
		newExportCmd(streams, g),
		newChartsCmd(streams),
		newImagesCmd(streams, g),
		newTaintCmd(streams, g, getenv, false),
		newTaintCmd(streams, g, getenv, true),
		newVersionCmd(streams, g),
		newStatusCmd(streams, g, getenv),
		newUninstallCmd(streams, g, getenv),
		newUpgradeCmd(streams, g, getenv),
		newDiagnoseCmd(streams, g),
		newOptionsCmd(streams, kube),
		newConfigCmd(streams, g, getenv),
		newVerifyCmd(streams, g, getenv),
	)
	registerCompletions(root, g)
	usageArgs(root)
	return root
}

// applySettings fills every flag the user did not set from GPUCTL_<FLAG> (dashes as underscores) or
// the config file, in that order of precedence; flags stay the only way values reach the options.
func applySettings(cmd *cobra.Command, configFile string, getenv func(string) string) error {
	return applySettingsFrom(cmd, configFile, getenv, nil)
}

// applySettingsFrom is applySettings that also records, in sources when it is not nil, where each
// flag it set came from ("GPUCTL_TIMEOUT", "config file F").
func applySettingsFrom(cmd *cobra.Command, configFile string, getenv func(string) string, sources map[string]string) error {
	v := viper.New()
	v.SetEnvPrefix("GPUCTL")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	configFile = findConfigFile(configFile, getenv)
	if configFile != "" {
		if err := readConfigFile(cmd.Root(), v, configFile); err != nil {
			return err
		}
	}
	var ferr error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || ferr != nil {
			return
		}
		source, err := applySetting(cmd.Flags(), f, v, configFile, getenv)
		if source != "" && sources != nil {
			sources[f.Name] = source
		}
		ferr = err
	})
	return ferr
}

// findConfigFile is the config file to read: --config, else GPUCTL_CONFIG, else
// $XDG_CONFIG_HOME/gpuctl/config.yaml (or ~/.config/gpuctl/config.yaml) where it exists; "" for none.
func findConfigFile(configFile string, getenv func(string) string) string {
	if configFile == "" {
		// GPUCTL_CONFIG names the file as the other GPUCTL_* variables set flags: it must be read
		// before the file it names is.
		configFile = getenv("GPUCTL_CONFIG")
	}
	if configFile == "" {
		if dir := getenv("XDG_CONFIG_HOME"); dir != "" {
			configFile = filepath.Join(dir, "gpuctl", "config.yaml")
		} else if home, err := os.UserHomeDir(); err == nil {
			configFile = filepath.Join(home, ".config", "gpuctl", "config.yaml")
		}
		if _, err := os.Stat(configFile); err != nil {
			configFile = ""
		}
	}
	return configFile
}

// readConfigFile reads the config file into v, refusing one that does not parse, has another version,
// or has a key that is no gpuctl flag.
func readConfigFile(root *cobra.Command, v *viper.Viper, configFile string) error {
	v.SetConfigFile(configFile)
	if err := v.ReadInConfig(); err != nil {
		return usageError{fmt.Errorf("config file %s: %w", configFile, err)}
	}
	if err := checkConfigVersion(v, configFile); err != nil {
		return err
	}
	return checkConfigKeys(root, v, configFile)
}

// applySetting sets a flag the user did not set from GPUCTL_<FLAG>, else from the config file, and
// says where its value came from ("GPUCTL_TIMEOUT", "config file F"; "" when from neither, or when a
// list in the file meets a flag that takes one value).
func applySetting(flags *pflag.FlagSet, f *pflag.Flag, v *viper.Viper, configFile string, getenv func(string) string) (source string, err error) {
	envName := "GPUCTL_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
	if env := getenv(envName); env != "" {
		return envName, setFlag(flags, f.Name, envName, env)
	}
	if !v.IsSet(f.Name) {
		return "", nil
	}
	source = "config file " + configFile
	list, ok := v.Get(f.Name).([]any)
	if !ok {
		return source, setFlag(flags, f.Name, source, v.GetString(f.Name))
	}
	// A YAML list stays a list: each item is one value of a repeatable flag (-f, --set,
	// --skip-check), never items joined into one value with commas.
	sv, ok := f.Value.(pflag.SliceValue)
	if !ok {
		return "", usageError{fmt.Errorf("%s: %s takes one value, not a list", source, f.Name)}
	}
	items := make([]string, 0, len(list))
	for _, x := range list {
		items = append(items, fmt.Sprint(x))
	}
	err = sv.Replace(items)
	f.Changed = true
	if err != nil {
		return source, usageError{fmt.Errorf("%s: %s: %w", source, f.Name, err)}
	}
	return source, nil
}

// setFlag sets a flag to a value from source, a usage error naming both where it does not parse.
func setFlag(flags *pflag.FlagSet, name, source, val string) error {
	if err := flags.Set(name, val); err != nil {
		return usageError{fmt.Errorf("%s=%s: %w", source, val, err)}
	}
	return nil
}

// clients builds the Kubernetes clients from the kubectl flags and makes sure the API server answers
// (kube.Clients.Reach): an unreachable one is one line naming it, within the request timeout, before
// any verb's first real request.
func (g *globals) clients() (*kube.Clients, error) {
	return reachableClients(g.ctx, g.kube, *g.kube.Namespace)
}

// clientsReachedLater builds the clients without asking the API server yet: for the verbs whose
// engine judges inputs first (install, upgrade) and then calls the returned clients' Reach.
func (g *globals) clientsReachedLater() (*kube.Clients, error) {
	return kube.NewClients(g.kube, *g.kube.Namespace)
}

// reachableClients builds the clients from getter and makes sure the API server answers.
func reachableClients(ctx context.Context, getter genericclioptions.RESTClientGetter, namespace string) (*kube.Clients, error) {
	c, err := kube.NewClients(getter, namespace)
	if err != nil {
		return nil, err
	}
	if err := c.Reach(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// progress returns the renderer for stderr progress.
func (g *globals) progressRenderer(w io.Writer, getenv func(string) string) (*ui.Progress, error) {
	format := ui.Format(g.progress)
	switch format {
	case ui.FormatAuto, ui.FormatPlain, ui.FormatJSON:
	default:
		return nil, usageError{fmt.Errorf("--progress must be auto, plain or json, not %q", g.progress)}
	}
	return ui.NewProgress(w, format, ui.DetectStyle(w, getenv)), nil
}

// usageArgs makes every command's check of its arguments a usage mistake (exit 2), as cobra's flag
// errors are (SetFlagErrorFunc); cobra returns argument errors unmarked.
func usageArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}

// usageError marks a command-line mistake (exit 2).
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

// notReadyError marks an install whose GPU stack did not become ready (exit 4).
type notReadyError struct{ error }

func (n notReadyError) Unwrap() error { return n.error }

// report prints err as one readable line (the step's diagnosis and hint were printed as progress) and
// returns the exit code for it.
func report(w io.Writer, err error) int {
	var ue usageError
	var unreachable *kube.UnreachableError
	var busy *release.BusyError
	switch {
	case errors.Is(err, context.Canceled):
		if ie := (*runner.InterruptedError)(nil); errors.As(err, &ie) {
			_ = ui.PrintInterrupted(w, ie)
		} else {
			fmt.Fprintln(w, "gpuctl: interrupted")
		}
		return ExitInterrupted
	case errors.As(err, &unreachable):
		// Its own line names the server and what happened; what failed to reach it adds nothing.
		fmt.Fprintf(w, "gpuctl: %v\n", unreachable)
		return ExitUnreachable
	case errors.As(err, &ue):
		fmt.Fprintf(w, "gpuctl: %v\n", err)
		return ExitUsage
	case errors.Is(err, preflight.ErrFailed):
		fmt.Fprintf(w, "gpuctl: %v\nNothing was changed.\n", err)
		return ExitPreflight
	case errors.Is(err, plan.ErrInput):
		fmt.Fprintf(w, "gpuctl: %v\n", err)
		return ExitUsage
	case errors.As(err, &busy):
		fmt.Fprintf(w, "gpuctl: %v\n%s.\n", err, busy.Hint())
		return ExitLocked
	case errors.Is(err, lock.ErrLocked):
		fmt.Fprintf(w, "gpuctl: %v\nNothing was changed; run this again when that run has finished, or wait for it with --wait-for-lock 15m.\n", err)
		return ExitLocked
	case errors.Is(err, plan.ErrUnsupported):
		fmt.Fprintf(w, "gpuctl: %v\nNothing was changed.\n", err)
		return ExitUnsupported
	}
	fmt.Fprintf(w, "gpuctl: %v\n", err)
	var nr notReadyError
	if errors.As(err, &nr) {
		return ExitNotReady
	}
	var ni notInstalledError
	if errors.As(err, &ni) {
		return ExitNotInstalled
	}
	var vf verifyFailedError
	if errors.As(err, &vf) {
		return ExitVerifyFailed
	}
	if strings.Contains(err.Error(), "unknown command") || strings.Contains(err.Error(), "unknown flag") {
		return ExitUsage
	}
	return ExitError
}

// outputFlag validates -o.
func outputFlag(value string, allowed ...string) error {
	for _, a := range allowed {
		if value == a {
			return nil
		}
	}
	return usageError{fmt.Errorf("-o must be one of %s, not %q", strings.Join(allowed, ", "), value)}
}
