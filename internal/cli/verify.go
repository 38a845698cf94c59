package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/fleet"
	"github.com/gpuctl/gpuctl/internal/runner"
	"github.com/gpuctl/gpuctl/internal/ui"
)

// verifyFailedError marks a verify run in which a GPU node did not pass (exit ExitVerifyFailed).
type verifyFailedError struct{ error }

// Unwrap is the run's error.
func (v verifyFailedError) Unwrap() error { return v.error }

// verifyLong is verify's help.
const verifyLong = `verify starts one pod per GPU node (the nodes labelled nvidia.com/gpu.present=true, narrowed by
--nodes) that requests one nvidia.com/gpu and runs CUDA's vectorAdd sample, waits for each to finish,
and reports per node: passed, failed (with the pod's last log lines and events), unschedulable (with
the scheduler's reason) or timeout. It removes the pods it created on every way out, Ctrl-C included,
and first removes pods an earlier verify run left behind (by UID: a pod made meanwhile under the same
name stays). Every write is planned before the first; --dry-run prints the plan and writes nothing,
and -o json reports what the run did in the plan's shape. It runs under gpuctl's install lock, as
install does: while another gpuctl run writes, verify waits (--wait-for-lock) or exits 6 naming it.
Before the first write it asks the API server whether you may create, watch and delete its pods, and
refuses to start (exit 5) without one of them: it never makes pods it could not remove.
Exit codes: 0 every node passed, 8 a node did not pass, 4 no GPU node is labelled yet, 5 a permission
is missing, 6 another gpuctl run holds the lock, 7 nothing installed, 1 the run's pods could not be
removed.

With --contexts a,b,c or --all-contexts it verifies many clusters of the kubeconfig at once (at most
--max-parallel), and prints one table with a row per context (or one document with -o json). It exits
with the worst context's code, worst first: 130, 2, 1, 9, 3, 5, 6, 8, 4, 7, 0.`

// newVerifyCmd is gpuctl verify: flags → engine.VerifyOptions → engine.Verify (or, over many
// contexts, fleetVerify) → writeVerify.
func newVerifyCmd(streams Streams, g *globals, getenv func(string) string) *cobra.Command {
	var output string
	var ff fleetFlags
	o := engine.VerifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Run a CUDA workload on every GPU node and report, node by node, whether it ran",
		Long:  verifyLong,
		Example: `  gpuctl verify
  gpuctl verify --dry-run -o json   # the pods it would delete (with UIDs) and create
  gpuctl verify --all-contexts      # every cluster of the kubeconfig, one row each
  gpuctl verify --nodes nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 -o json
  gpuctl verify --image registry.example.com/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0 --image-pull-secret mirror`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateVerify(o, output); err != nil {
				return err
			}
			contexts, err := ff.resolve(g)
			if err != nil {
				return err
			}
			if contexts != nil {
				return fleetVerify(cmd.Context(), streams.Out, output, ui.DetectStyle(streams.Out, getenv), g, contexts, ff.maxParallel, o)
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
			res, err := (&engine.Verify{Clients: clients, Options: o, Sink: progress}).Run(cmd.Context())
			progress.Close()
			return writeVerify(streams.Out, output, res, err, ui.DetectStyle(streams.Out, getenv))
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "text", "result format: text, json, yaml")
	f.StringVar(&o.Image, "image", engine.DefaultVerifyImage, "the workload's image (a mirror's copy of CUDA's vectorAdd sample for air-gapped clusters)")
	f.StringVar(&o.Nodes, "nodes", "", "label selector that narrows the GPU nodes to verify (e.g. nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB)")
	f.DurationVar(&o.Timeout, "timeout", engine.DefaultVerifyTimeout, "how long to wait for the workloads to finish")
	f.StringSliceVar(&o.ImagePullSecrets, "image-pull-secret", nil, "Secret in the operator's namespace to pull --image with (repeatable)")
	f.BoolVar(&o.DryRun, "dry-run", false, "change nothing, take no lock: print the pods verify would delete (with UIDs) and create")
	f.DurationVar(&o.WaitForLock, "wait-for-lock", 0, "how long to wait while another gpuctl run holds the install lock (default 0: exit 6 at once, naming it)")
	addFleetFlags(f, &ff)
	return cmd
}

// validateVerify refuses a mistake in verify's command line before any cluster is contacted.
func validateVerify(o engine.VerifyOptions, output string) error {
	if err := outputFlag(output, "text", "json", "yaml"); err != nil {
		return err
	}
	if err := validateTimeout(o.Timeout); err != nil {
		return err
	}
	if _, err := labels.Parse(o.Nodes); err != nil {
		return usageError{fmt.Errorf("--nodes %q is not a label selector: %w", o.Nodes, err)}
	}
	if err := validateImageOptions(&engine.InstallOptions{ImagePullSecrets: o.ImagePullSecrets}); err != nil {
		return err
	}
	return validateWaitForLock(o.WaitForLock)
}

// writeVerify prints a verify run's result (or its plan, for a dry run) and returns the error that
// gives its exit code. An interrupted run's result (the steps, the pods it removed) is written only as
// -o json or yaml: it has no verdicts to show, and report says where it stopped.
func writeVerify(w io.Writer, output string, res *engine.VerifyResult, err error, style ui.Style) error {
	if ie := (*runner.InterruptedError)(nil); res != nil && errors.As(err, &ie) {
		if werr := writeResult(w, output, res, nil); werr != nil {
			return werr
		}
		return err
	}
	if res == nil || (err != nil && !errors.Is(err, engine.ErrVerifyFailed) && !errors.Is(err, engine.ErrPodsLeft)) {
		return verifyError(err)
	}
	if werr := writeResult(w, output, res, func() error {
		if res.DryRun {
			return ui.PrintVerifyPlan(w, res.Plan)
		}
		return ui.PrintVerify(w, res, style)
	}); werr != nil {
		return werr
	}
	return verifyError(err)
}

// verifyError is the error that gives a verify run's exit code: a node did not pass (8), nothing
// installed (7), no GPU node labelled yet (4), or the run's own error.
func verifyError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, engine.ErrVerifyFailed):
		return verifyFailedError{err}
	case errors.Is(err, engine.ErrNotInstalled):
		return notInstalledError{err}
	case errors.Is(err, engine.ErrNoLabelledGPUNodes):
		return notReadyError{fmt.Errorf("%w; wait for the operator to label the GPU nodes (gpuctl status --wait)", err)}
	}
	return err
}

// fleetVerify runs verify over contexts, at most parallel at once, and prints one table or document;
// its error carries the worst context's exit code.
func fleetVerify(ctx context.Context, w io.Writer, output string, style ui.Style, g *globals, contexts []string, parallel int, o engine.VerifyOptions) error {
	outcomes := fleet.Run(ctx, contexts, parallel, ExitInterrupted, func(ctx context.Context, name string) (*engine.VerifyResult, int, error) {
		clients, err := g.contextClients(ctx, name)
		if err != nil {
			return nil, exitCode(err), err
		}
		res, err := (&engine.Verify{Clients: clients, Options: o}).Run(ctx)
		err = verifyError(err)
		return res, exitCode(err), err
	})
	code, err := fleetResult(outcomes)
	doc := &ui.FleetVerify{ExitCode: code}
	for _, out := range outcomes {
		doc.Contexts = append(doc.Contexts, ui.FleetVerifyEntry{Context: out.Context, State: verifyState(out.ExitCode, o.DryRun), ExitCode: out.ExitCode, Error: errorText(out.Err), Result: out.Result})
	}
	if werr := writeResult(w, output, doc, func() error { return ui.PrintFleetVerify(w, doc, style) }); werr != nil {
		return werr
	}
	return err
}

// verifyState names a context's verify run by its exit code, one word for a table's column.
func verifyState(code int, dryRun bool) string {
	switch code {
	case ExitOK:
		if dryRun {
			return "planned"
		}
		return "passed"
	case ExitVerifyFailed:
		return "failed"
	case ExitNotReady:
		return "not-ready"
	case ExitNotInstalled:
		return "not-installed"
	}
	return failureState(code)
}
