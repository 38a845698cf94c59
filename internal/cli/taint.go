package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/taint"
	"github.com/gpuctl/gpuctl/internal/ui"
)

func newTaintCmd(streams Streams, g *globals, getenv func(string) string, untaint bool) *cobra.Command {
	var dryRun bool
	var waitForLock time.Duration
	use, short := "taint", "Taint GPU nodes nvidia.com/gpu=present:NoSchedule, recording what gpuctl added"
	if untaint {
		use, short = "untaint", "Remove the taints gpuctl added, and only those"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateWaitForLock(waitForLock); err != nil {
				return err
			}
			clients, err := g.clients()
			if err != nil {
				return err
			}
			// Per-node progress goes through the --progress renderer (plain lines, or JSON events for CI);
			// the result (kubectl's "node/NAME tainted" lines) goes to stdout.
			progress, err := g.progressRenderer(streams.Err, getenv)
			if err != nil {
				return err
			}
			defer progress.Close()
			onNode := func(r taint.NodeResult) {
				if r.Err != nil {
					progress.Event(event.Event{Type: event.Warning, Message: fmt.Sprintf("node/%s: %v", r.Node, r.Err)})
					return
				}
				if g.progress == string(ui.FormatJSON) {
					// stdout has the result lines; JSON progress is for machines that follow along.
					progress.Event(event.Event{Type: event.Info, Message: fmt.Sprintf("node/%s %s", r.Node, r.Action)})
				}
			}
			var res taint.Result
			if untaint {
				res, err = (&engine.UntaintNodes{Clients: clients, DryRun: dryRun, WaitForLock: waitForLock, Sink: progress, OnNode: onNode}).Run(cmd.Context())
			} else {
				res, err = (&engine.TaintNodes{Clients: clients, DryRun: dryRun, WaitForLock: waitForLock, Sink: progress, OnNode: onNode}).Run(cmd.Context())
			}
			progress.Close()
			for _, r := range res.Nodes {
				if r.Err == nil {
					fmt.Fprintf(streams.Out, "node/%s %s\n", r.Node, r.Action)
				}
			}
			if err != nil {
				return err
			}
			if len(res.Nodes) == 0 && untaint {
				fmt.Fprintln(streams.Out, "no node carries a taint recorded by gpuctl")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would change, change nothing")
	cmd.Flags().DurationVar(&waitForLock, "wait-for-lock", 0, "how long to wait while another gpuctl run holds the install lock (default 0: exit 6 at once, naming it)")
	return cmd
}
