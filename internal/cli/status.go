package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/ui"
)

// notInstalledError marks status on a cluster with nothing installed (exit ExitNotInstalled).
type notInstalledError struct{ error }

func (n notInstalledError) Unwrap() error { return n.error }

func newStatusCmd(streams Streams, g *globals, getenv func(string) string) *cobra.Command {
	var output string
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Check the GPU stack gpuctl installed: operator, NFD, ClusterPolicy and every GPU node",
		Long: `status reads the install record and the cluster and reports, check by check, whether the GPU
stack is healthy. It changes nothing. Exit codes: 0 healthy, 4 not ready, 7 nothing installed.`,
		Example: `  gpuctl status
  gpuctl status -o json
  gpuctl status --wait --timeout 10m   # gate a pipeline on a healthy stack`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFlag(output, "text", "json", "yaml"); err != nil {
				return err
			}
			if cmd.Flags().Changed("timeout") && !wait {
				return usageError{errors.New("--timeout applies with --wait only")}
			}
			if err := validateTimeout(timeout); err != nil {
				return err
			}
			clients, err := g.clients()
			if err != nil {
				return err
			}
			progress, err := g.progressRenderer(streams.Err, getenv)
			if err != nil {
				return err
			}
			defer progress.Close()
			st := &engine.Status{Clients: clients, Sink: progress}
			if wait {
				st.Wait = timeout
			}
			res, err := st.Run(cmd.Context())
			progress.Close()
			if res == nil {
				return err
			}
			if werr := writeResult(streams.Out, output, res, func() error { return ui.PrintStatus(streams.Out, res, ui.DetectStyle(streams.Out, getenv)) }); werr != nil {
				return werr
			}
			switch {
			case errors.Is(err, engine.ErrNotInstalled):
				return notInstalledError{err}
			case err != nil:
				return err
			case !res.Healthy:
				return notReadyError{fmt.Errorf("the GPU stack is not ready")}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "text", "result format: text, json, yaml")
	f.BoolVar(&wait, "wait", false, "wait until the stack is healthy (or --timeout passes) before reporting")
	f.DurationVar(&timeout, "timeout", engine.DefaultStatusWait, "how long --wait waits")
	return cmd
}
