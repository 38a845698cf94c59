package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuctl/gpuctl/internal/engine"
)

func newUninstallCmd(streams Streams, g *globals, getenv func(string) string) *cobra.Command {
	var o engine.UninstallOptions
	var yes bool
	var output string
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove the GPU stack gpuctl installed, its taints and the node labels NFD and the operator left",
		Long: `uninstall is install in reverse: it deletes the ClusterPolicy and NVIDIADriver objects and waits
until the operator has removed its operands, uninstalls the operator, Google's driver installer and NFD
(on OpenShift: the Subscriptions, CSVs and the NodeFeatureDiscovery instance), then removes exactly the
taints gpuctl added and the feature.node.kubernetes.io/* and nvidia.com/* node labels, leaving every
other taint and label as it was. --purge also deletes the CRDs and namespaces gpuctl created (never
ones it found). A second uninstall does nothing.`,
		Example: `  gpuctl uninstall
  gpuctl uninstall --purge --yes   # in CI: no prompt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFlag(output, "text", "json", "yaml"); err != nil {
				return err
			}
			if err := validateTimeout(o.Timeout); err != nil {
				return err
			}
			if o.FinalizerWait <= 0 {
				return usageError{fmt.Errorf("--finalizer-wait %s: must be positive", o.FinalizerWait)}
			}
			what := "Uninstall the GPU stack gpuctl installed"
			if o.Purge {
				what += ", and delete the CRDs and namespaces it created (with every object in them)"
			}
			if err := confirm(streams, getenv, yes, "gpuctl uninstall", what+"?"); err != nil {
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
			res, err := (&engine.Uninstall{Clients: clients, Options: o, Sink: progress}).Run(cmd.Context())
			progress.Close()
			if res != nil {
				werr := writeResult(streams.Out, output, res, func() error {
					switch {
					case err != nil:
					case !res.Changed:
						fmt.Fprintln(streams.Out, "Nothing to uninstall: gpuctl's GPU stack is not installed.")
					default:
						fmt.Fprintln(streams.Out, "Uninstalled.")
					}
					return nil
				})
				if werr != nil {
					return werr
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.Purge, "purge", false, "also delete the CRDs and namespaces gpuctl created (never ones it found) and its install record")
	f.BoolVarP(&yes, "yes", "y", false, "do not ask; required without a terminal or when CI is set")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "how long the whole uninstall may take")
	f.DurationVar(&o.FinalizerWait, "finalizer-wait", 2*time.Minute, "how long a deleted object may stay before uninstall stops and names the finalizer holding it")
	f.DurationVar(&o.WaitForLock, "wait-for-lock", 0, "how long to wait while another gpuctl run holds the install lock (default 0: exit 6 at once, naming it)")
	f.StringVarP(&output, "output", "o", "text", "result format: text, json, yaml")
	return cmd
}
