package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/fleet"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/ui"
)

// notInstalledError marks status on a cluster with nothing installed (exit ExitNotInstalled).
type notInstalledError struct{ error }

func (n notInstalledError) Unwrap() error { return n.error }

// statusCmd is gpuctl status: its flags and what it runs with.
type statusCmd struct {
	streams Streams
	g       *globals
	getenv  func(string) string
	output  string
	wait    bool
	timeout time.Duration
	ff      fleetFlags
}

func newStatusCmd(streams Streams, g *globals, getenv func(string) string) *cobra.Command {
	st := &statusCmd{streams: streams, g: g, getenv: getenv}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Check the GPU stack gpuctl installed: operator, NFD, ClusterPolicy and every GPU node",
		Long: `status reads the install record and the cluster and reports, check by check, whether the GPU
stack is healthy. It changes nothing. Exit codes: 0 healthy, 4 not ready, 7 nothing installed.

With --contexts a,b,c or --all-contexts it reads many clusters of the kubeconfig at once (at most
--max-parallel), and prints one table with a row per context (or one document with -o json); a
context that cannot be reached is a row of its own. It exits with the worst context's code, worst
first: 130, 2, 1, 9, 3, 5, 6, 8, 4, 7, 0.`,
		Example: `  gpuctl status
  gpuctl status -o json
  gpuctl status --contexts gpu-east,gpu-west   # one row per cluster, the worst exit code
  gpuctl status --all-contexts -o json
  gpuctl status --wait --timeout 10m   # gate a pipeline on a healthy stack`,
		Args: cobra.NoArgs,
		RunE: st.run,
	}
	st.addFlags(cmd.Flags())
	return cmd
}

// addFlags declares status's flags: its own, then the fleet flags.
func (st *statusCmd) addFlags(f *pflag.FlagSet) {
	f.StringVarP(&st.output, "output", "o", "text", "result format: text, json, yaml")
	f.BoolVar(&st.wait, "wait", false, "wait until the stack is healthy (or --timeout passes) before reporting")
	f.DurationVar(&st.timeout, "timeout", engine.DefaultStatusWait, "how long --wait waits")
	addFleetFlags(f, &st.ff)
}

// run judges the flags and reads the status of the current context, or of many with the fleet
// flags, and prints it; its error gives the exit code.
func (st *statusCmd) run(cmd *cobra.Command, _ []string) error {
	if err := st.validate(cmd); err != nil {
		return err
	}
	timeout := st.timeout
	if !st.wait {
		timeout = 0
	}
	contexts, err := st.ff.resolve(st.g)
	if err != nil {
		return err
	}
	style := ui.DetectStyle(st.streams.Out, st.getenv)
	if contexts != nil {
		return fleetStatus(cmd.Context(), st.streams.Out, st.output, style, st.g, contexts, st.ff.maxParallel, timeout)
	}
	clients, err := st.g.clients()
	if err != nil {
		return err
	}
	progress, err := st.g.progressRenderer(st.streams.Err, st.getenv)
	if err != nil {
		return err
	}
	defer progress.Close()
	res, err := runStatus(cmd.Context(), clients, progress, timeout)
	progress.Close()
	if res == nil {
		return err
	}
	if werr := writeResult(st.streams.Out, st.output, res, func() error { return ui.PrintStatus(st.streams.Out, res, style) }); werr != nil {
		return werr
	}
	return err
}

// validate judges -o and the timeout: --timeout goes with --wait only.
func (st *statusCmd) validate(cmd *cobra.Command) error {
	if err := outputFlag(st.output, "text", "json", "yaml"); err != nil {
		return err
	}
	if cmd.Flags().Changed("timeout") && !st.wait {
		return usageError{errors.New("--timeout applies with --wait only")}
	}
	return validateTimeout(st.timeout)
}

// runStatus reads the GPU stack's status (waiting up to wait first when it is above zero) and returns
// the error that gives its exit code: nothing installed (7), not ready (4) or the read's own.
func runStatus(ctx context.Context, clients *kube.Clients, sink event.Sink, wait time.Duration) (*engine.StatusResult, error) {
	res, err := (&engine.Status{Clients: clients, Sink: sink, Wait: wait}).Run(ctx)
	switch {
	case res == nil:
		return nil, err
	case errors.Is(err, engine.ErrNotInstalled):
		return res, notInstalledError{err}
	case err != nil:
		return res, err
	case !res.Healthy:
		return res, notReadyError{notReadyReason(res)}
	}
	return res, nil
}

// notReadyReason is the first failed check, as the error of a stack that is not ready.
func notReadyReason(res *engine.StatusResult) error {
	for _, c := range res.Checks {
		if c.State == engine.CheckFailed {
			return fmt.Errorf("the GPU stack is not ready: %s: %s", c.Name, c.Message)
		}
	}
	return errors.New("the GPU stack is not ready")
}

// fleetStatus runs status over contexts, at most parallel at once, and prints one table or document;
// its error carries the worst context's exit code.
func fleetStatus(ctx context.Context, w io.Writer, output string, style ui.Style, g *globals, contexts []string, parallel int, wait time.Duration) error {
	outcomes := fleet.Run(ctx, contexts, parallel, ExitInterrupted, func(ctx context.Context, name string) (*engine.StatusResult, int, error) {
		clients, err := g.contextClients(ctx, name)
		if err != nil {
			return nil, exitCode(err), err
		}
		res, err := runStatus(ctx, clients, nil, wait)
		return res, exitCode(err), err
	})
	code, err := fleetResult(outcomes)
	doc := &ui.FleetStatus{ExitCode: code}
	for _, o := range outcomes {
		doc.Contexts = append(doc.Contexts, ui.FleetStatusEntry{Context: o.Context, State: statusState(o.ExitCode), ExitCode: o.ExitCode, Error: errorText(o.Err), Result: o.Result})
	}
	if werr := writeResult(w, output, doc, func() error { return ui.PrintFleetStatus(w, doc, style) }); werr != nil {
		return werr
	}
	return err
}

// statusState names a context's status by its exit code, one word for a table's column.
func statusState(code int) string {
	switch code {
	case ExitOK:
		return "healthy"
	case ExitNotReady:
		return "not-ready"
	case ExitNotInstalled:
		return "not-installed"
	}
	return failureState(code)
}

// failureState names the exit codes of a context that gave no verdict.
func failureState(code int) string {
	switch code {
	case ExitUnreachable:
		return "unreachable"
	case ExitInterrupted:
		return "interrupted"
	case ExitLocked:
		return "locked"
	case ExitUsage:
		return "refused"
	}
	return "error"
}

// errorText is err's line, "" for none.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
