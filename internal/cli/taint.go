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

const taintLong = `taint puts nvidia.com/gpu=present:NoSchedule on the GPU nodes detection finds, and records on each
node (annotation gpuctl.io/added-taints) what it added, so that untaint removes exactly that. It
judges the taint by install's rules: where it would strand a workload running today (its pods fit
no node without GPUs, or request GPUs and nothing adds the toleration) it stops before any write
(exit 5) unless --force; where install would not taint by default (every schedulable node is a GPU
node, or nothing adds the toleration to GPU pods) it taints, since you asked, and the plan says so
and names the toleration pods need. Every decision is made before the first write, and the run
writes exactly what --dry-run prints: a node that changed in between is reported, not overwritten.`

const untaintLong = `untaint removes the taints gpuctl recorded on each node (annotation gpuctl.io/added-taints), and the
record, and nothing else: a taint that was there before gpuctl, or whose value someone changed
since, stays. Every decision is made before the first write, and the run writes exactly what
--dry-run prints: a node that changed in between is reported, not overwritten.`

// newTaintCmd is gpuctl taint, or with untaint gpuctl untaint: flags → engine.TaintNodes or
// engine.UntaintNodes → ui.PrintTaintResult.
func newTaintCmd(streams Streams, g *globals, getenv func(string) string, untaint bool) *cobra.Command {
	var dryRun, force bool
	var output string
	var waitForLock time.Duration
	use, short, long := "taint", "Taint GPU nodes nvidia.com/gpu=present:NoSchedule, recording what gpuctl added", taintLong
	if untaint {
		use, short, long = "untaint", "Remove the taints gpuctl added, and only those", untaintLong
	}
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Long:    long,
		Example: fmt.Sprintf("  gpuctl %s --dry-run -o json   # each node's taint change, and the nodes left alone with why\n  gpuctl %s", use, use),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFlag(output, "text", "json", "yaml"); err != nil {
				return err
			}
			if err := validateWaitForLock(waitForLock); err != nil {
				return err
			}
			clients, err := g.clients()
			if err != nil {
				return err
			}
			// Per-node progress goes through the --progress renderer (plain lines, or JSON events for CI);
			// the result goes to stdout.
			progress, err := g.progressRenderer(streams.Err, getenv)
			if err != nil {
				return err
			}
			defer progress.Close()
			onNode := nodeProgress(progress, g.progress == string(ui.FormatJSON))
			var res *engine.TaintResult
			if untaint {
				res, err = (&engine.UntaintNodes{Clients: clients, DryRun: dryRun, WaitForLock: waitForLock, Sink: progress, OnNode: onNode}).Run(cmd.Context())
			} else {
				res, err = (&engine.TaintNodes{Clients: clients, DryRun: dryRun, Force: force, WaitForLock: waitForLock, Sink: progress, OnNode: onNode}).Run(cmd.Context())
			}
			progress.Close()
			if res != nil {
				if werr := writeResult(streams.Out, output, res, func() error { return ui.PrintTaintResult(streams.Out, res, err) }); werr != nil {
					return werr
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&dryRun, "dry-run", false, "change nothing: print each node's taint change, and the nodes left alone with why")
	if !untaint {
		f.BoolVar(&force, "force", false, "taint even where that strands workloads running today (without it such a taint stops before any change, exit 5)")
	}
	f.StringVarP(&output, "output", "o", "text", "result format: text, json, yaml")
	f.DurationVar(&waitForLock, "wait-for-lock", 0, "how long to wait while another gpuctl run holds the install lock (default 0: exit 6 at once, naming it)")
	return cmd
}

// nodeProgress reports each node's outcome as progress: failures always, every node with JSON
// progress (stdout has the result; JSON progress is for machines that follow along).
func nodeProgress(progress event.Sink, all bool) func(taint.NodeResult) {
	return func(r taint.NodeResult) {
		if r.Err != nil {
			progress.Event(event.Event{Type: event.Warning, Message: fmt.Sprintf("node/%s: %v", r.Node, r.Err)})
			return
		}
		if all {
			progress.Event(event.Event{Type: event.Info, Message: fmt.Sprintf("node/%s %s", r.Node, r.Action)})
		}
	}
}
