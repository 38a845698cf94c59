package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/viper"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/klog/v2"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/ui"
	"github.com/gpuctl/gpuctl/internal/wizard"
)

// wizardFlags are the wizard's own flags beside the install's.
type wizardFlags struct {
	save     string
	planFile string
}

func addWizardFlags(cmd *cobra.Command, w *wizardFlags) {
	cmd.Flags().StringVar(&w.save, "save", "gpuctl-install.yaml", "wizard: where s on the review screen saves your choices (replay with gpuctl install --config FILE)")
	cmd.Flags().StringVar(&w.planFile, "plan-file", "", "wizard: also write the Plan you confirm as JSON (what install --dry-run -o json prints)")
}

func newWizardCmd(streams Streams, g *globals, getenv func(string) string) *cobra.Command {
	var o engine.InstallOptions
	var w wizardFlags
	cmd := &cobra.Command{
		Use:   "wizard",
		Short: "Install interactively: pick the context, see what was detected, choose, review the plan, watch the install",
		Long: `The wizard asks only what gpuctl cannot detect, shows the plan before anything changes, and runs the
same install as gpuctl install with live progress. On the review screen, s saves your choices as a config
file that gpuctl install --config FILE replays unchanged, e.g. in CI. It needs a terminal: without one (or
with CI set) it prints the equivalent gpuctl install command instead. Flags given here preset the choices.`,
		Example: `  gpuctl wizard
  gpuctl wizard --context my-cluster --save ci/gpuctl.yaml
  gpuctl install --interactive          # the same`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWizard(cmd.Context(), streams, g, getenv, o, w)
		},
	}
	f := cmd.Flags()
	addInstallFlags(f, &o, "values profile to preselect (default: the one chosen from the detected distribution)")
	f.StringSliceVar(&o.SkipChecks, "skip-check", nil, "a preflight check not to run, by ID; repeatable or comma-separated. IDs: "+checkIDs())
	f.BoolVar(&o.TolerateExistingTaints, "tolerate-existing-taints", false, "tolerate the GPU nodes' own NoSchedule/NoExecute taints in the NFD worker and the operands")
	f.DurationVar(&o.Timeout, "timeout", plan.DefaultTimeout, "how long the install may take once confirmed")
	f.DurationVar(&o.WaitForLock, "wait-for-lock", 0, "how long to wait while another gpuctl run holds the install lock")
	addWizardFlags(cmd, &w)
	return cmd
}

// runWizard checks the inputs as install does, refuses to start without a terminal, runs the wizard
// and turns its outcome into install's exit codes.
func runWizard(ctx context.Context, streams Streams, g *globals, getenv func(string) string, o engine.InstallOptions, w wizardFlags) error {
	if err := validateInstallInputs(&o); err != nil {
		return err
	}
	kubeContext := ""
	if g.kube.Context != nil {
		kubeContext = *g.kube.Context
	}
	ns := *g.kube.Namespace
	if reason := noTerminal(streams, getenv); reason != "" {
		return usageError{fmt.Errorf("the wizard needs a terminal, and %s; the same install without it:\n  %s", reason, wizard.Command(o, ns, kubeContext))}
	}
	for _, in := range []string{o.Licensing.NGCAPIKeyFile} {
		if in == "-" {
			return usageError{errors.New("the wizard reads the terminal: give the NGC key in the wizard, from a file or in $" + o.Licensing.NGCAPIKeyEnv + ", not -")}
		}
	}
	for _, f := range o.ValuesFiles {
		if f == "-" {
			return usageError{errors.New("the wizard reads the terminal: give -f a file, not -")}
		}
	}
	cfg := wizard.Config{
		Backend:   &clusterBackend{g: g},
		Base:      o,
		Namespace: ns,
		Context:   kubeContext,
		Color:     ui.DetectStyle(streams.Out, getenv).Color,
		Getenv:    getenv,
		SavePath:  w.save,
		PlanFile:  w.planFile,
	}
	// client-go logs through klog to stderr (a reflector whose watch broke under load, say), which
	// would write across the wizard's screen: while the screen is up, those lines are dropped; what
	// they report reaches the wizard as errors where it matters.
	klog.SetLogger(logr.Discard())
	out, err := wizard.Run(ctx, cfg, streams.In, streams.Out)
	klog.ClearLogger()
	if err != nil {
		return err
	}
	fmt.Fprint(streams.Out, out.Summary)
	var stuck *health.StuckError
	switch {
	case out.Quit, errors.Is(out.Err, context.Canceled):
		// The summary said what finished and how to resume; one line on stderr is enough.
		return context.Canceled
	case errors.As(out.Err, &stuck):
		return notReadyError{out.Err}
	}
	return out.Err
}

// noTerminal says why the wizard may not start ("" when it may): it draws on standard output and
// reads keys from standard input, and a CI job has no one to answer.
func noTerminal(streams Streams, getenv func(string) string) string {
	isTerm := func(v any) bool {
		f, ok := v.(*os.File)
		return ok && term.IsTerminal(int(f.Fd()))
	}
	switch {
	case getenv("CI") != "":
		return "CI is set"
	case !isTerm(streams.In):
		return "standard input is not one"
	case !isTerm(streams.Out):
		return "standard output is not one"
	}
	return ""
}

// checkConfigVersion refuses a config file of a version this gpuctl does not know. Files without a
// version (written by hand) are version 1.
func checkConfigVersion(v *viper.Viper, file string) error {
	if !v.IsSet("version") {
		return nil
	}
	if got := v.GetString("version"); got != fmt.Sprint(wizard.ConfigVersion) {
		return usageError{fmt.Errorf("config file %s: version %s: this gpuctl reads version %d", file, got, wizard.ConfigVersion)}
	}
	return nil
}

// clusterBackend is the wizard's Backend on real clusters: clients per kube context, built from the
// same kubectl flags as every command, and gpuctl's engine.
type clusterBackend struct {
	g       *globals
	mu      sync.Mutex
	clients map[string]*kube.Clients
}

func (b *clusterBackend) Contexts() ([]wizard.KubeContext, string, error) {
	raw, err := b.g.kube.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	out := make([]wizard.KubeContext, 0, len(raw.Contexts))
	for name, c := range raw.Contexts {
		out = append(out, wizard.KubeContext{Name: name, Cluster: c.Cluster, User: c.AuthInfo, Namespace: c.Namespace})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, raw.CurrentContext, nil
}

func (b *clusterBackend) clientsFor(ctx context.Context, name string) (*kube.Clients, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.clients[name]; ok {
		return c, nil
	}
	src := b.g.kube
	f := genericclioptions.NewConfigFlags(true)
	f.KubeConfig, f.ClusterName, f.AuthInfoName, f.APIServer = src.KubeConfig, src.ClusterName, src.AuthInfoName, src.APIServer
	f.TLSServerName, f.Insecure, f.CertFile, f.KeyFile, f.CAFile = src.TLSServerName, src.Insecure, src.CertFile, src.KeyFile, src.CAFile
	f.BearerToken, f.Impersonate, f.ImpersonateUID, f.ImpersonateGroup = src.BearerToken, src.Impersonate, src.ImpersonateUID, src.ImpersonateGroup
	f.Username, f.Password, f.Timeout = src.Username, src.Password, src.Timeout
	f.Namespace = src.Namespace
	f.Context = &name
	c, err := reachableClients(ctx, f, *src.Namespace)
	if err != nil {
		return nil, err
	}
	if b.clients == nil {
		b.clients = map[string]*kube.Clients{}
	}
	b.clients[name] = c
	return c, nil
}

func (b *clusterBackend) Check(ctx context.Context, kubeContext string, o engine.InstallOptions) (*engine.CheckResult, error) {
	c, err := b.clientsFor(ctx, kubeContext)
	if err != nil {
		return nil, err
	}
	return (&engine.Check{Clients: c, Options: o, Skip: o.SkipChecks}).Run(ctx)
}

func (b *clusterBackend) Install(ctx context.Context, kubeContext string, o engine.InstallOptions, sink event.Sink,
	confirm func(*plan.Plan) bool, getenv func(string) string) (*engine.InstallResult, error) {
	c, err := b.clientsFor(ctx, kubeContext)
	if err != nil {
		return nil, err
	}
	res, err := (&engine.Install{Clients: c, Options: o, Sink: sink, Confirm: confirm, Getenv: getenv}).Run(ctx)
	if err != nil && res == nil {
		err = detectionFailed(err)
	}
	return res, err
}
