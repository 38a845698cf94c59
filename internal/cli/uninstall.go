package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/ui"
)

// uninstallCmd is gpuctl uninstall: its flags and what it runs with.
type uninstallCmd struct {
	streams Streams
	g       *globals
	getenv  func(string) string
	o       engine.UninstallOptions
	yes     bool
	output  string
}

// newUninstallCmd is gpuctl uninstall: flags → engine.UninstallOptions → engine.Uninstall →
// ui.PrintUninstall.
func newUninstallCmd(streams Streams, g *globals, getenv func(string) string) *cobra.Command {
	u := &uninstallCmd{streams: streams, g: g, getenv: getenv}
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove the GPU stack gpuctl installed, its taints and the node labels NFD and the operator left",
		Long: `uninstall is install in reverse, and touches only what gpuctl made. It deletes the ClusterPolicy,
NVIDIADriver (and on OpenShift NodeFeatureDiscovery) objects gpuctl created, known by the UIDs in its
install record, and waits until the garbage collector has removed everything they owned; others are
kept and listed. It uninstalls the operator, Google's driver installer and NFD (on OpenShift: the
Subscriptions and CSVs), removes exactly the taints gpuctl added, and gives every node back the
feature.node.kubernetes.io/*, nfd.node.kubernetes.io/* and nvidia.com/* labels it had before the
install: a label NFD, the operator or its operands wrote goes, one anyone else wrote (kubectl label
nvidia.com/mig.config=…) stays. Every decision is made before the first write; --dry-run prints them.
Before the first write it also asks the API server whether you may delete everything the plan removes
(each release's objects, the custom resources, the taints and labels) and stops (exit 5, naming what
you may not do) rather than leave half a stack.
--purge also deletes the CRDs, namespaces and objects gpuctl created (never ones it found); a CRD with
custom resources gpuctl did not create stops it before anything is deleted (exit 5), unless --force.
Every object gpuctl deletes itself goes only while it has the UID the install record keeps: one of
that name someone re-created is kept and named. A namespace gpuctl created that holds anything it did
not create is kept, with what it holds (a warning; exit 0).
Without an install record (kube-system/gpuctl-install) nothing says what gpuctl made: an uninstall
that finds releases of gpuctl's names stops before any change (exit 5) unless --adopt.
A second uninstall does nothing.`,
		Example: `  gpuctl uninstall --dry-run -o json   # what it would delete and keep, and each node's label changes
  gpuctl uninstall
  gpuctl uninstall --purge --yes       # in CI: no prompt
  gpuctl uninstall --adopt --yes       # no install record: take gpuctl's releases as its own`,
		Args: cobra.NoArgs,
		RunE: u.run,
	}
	u.addFlags(cmd.Flags())
	return cmd
}

// addFlags declares uninstall's flags.
func (u *uninstallCmd) addFlags(f *pflag.FlagSet) {
	o := &u.o
	f.BoolVar(&o.Purge, "purge", false, "also delete the CRDs and namespaces gpuctl created (never ones it found) and its install record")
	f.BoolVar(&o.Force, "force", false, "with --purge: delete the CRDs gpuctl created even when they have custom resources gpuctl did not create, deleting those resources too (without it such a purge stops before any change, exit 5)")
	f.BoolVar(&o.Adopt, "adopt", false, "without an install record: take the releases of gpuctl's names as gpuctl's and remove them, with the stack's node labels (without it such an uninstall stops before any change, exit 5)")
	f.BoolVar(&o.DryRun, "dry-run", false, "change nothing: print what uninstall would delete (with UIDs), keep and why, and each node's label changes")
	f.BoolVarP(&u.yes, "yes", "y", false, "do not ask; required without a terminal or when CI is set")
	f.DurationVar(&o.Timeout, "timeout", engine.DefaultUninstallTimeout, "how long the whole uninstall may take")
	f.DurationVar(&o.FinalizerWait, "finalizer-wait", engine.DefaultFinalizerWait, "how long a deleted object may stay before uninstall stops and names the finalizer holding it")
	f.DurationVar(&o.WaitForLock, "wait-for-lock", 0, "how long to wait while another gpuctl run holds the install lock (default 0: exit 6 at once, naming it)")
	f.StringVarP(&u.output, "output", "o", "text", "result format: text, json, yaml")
}

// run judges the flags, asks first (unless --dry-run or --yes), runs the uninstall and prints what it
// did or, with --dry-run, would do.
func (u *uninstallCmd) run(cmd *cobra.Command, _ []string) error {
	if err := u.validate(); err != nil {
		return err
	}
	if !u.o.DryRun {
		if err := confirm(u.streams, u.getenv, u.yes, "gpuctl uninstall", u.question()); err != nil {
			return err
		}
	}
	clients, err := u.g.clients()
	if err != nil {
		return err
	}
	progress, err := u.g.progressRenderer(u.streams.Err, u.getenv)
	if err != nil {
		return err
	}
	defer progress.Close()
	res, err := (&engine.Uninstall{Clients: clients, Options: u.o, Sink: progress}).Run(cmd.Context())
	progress.Close()
	if res != nil {
		if werr := u.writeResult(res, err); werr != nil {
			return werr
		}
	}
	return err
}

// validate refuses a mistake in uninstall's flags before anything is read from the cluster.
func (u *uninstallCmd) validate() error {
	if err := outputFlag(u.output, "text", "json", "yaml"); err != nil {
		return err
	}
	if err := validateTimeout(u.o.Timeout); err != nil {
		return err
	}
	if err := validateWaitForLock(u.o.WaitForLock); err != nil {
		return err
	}
	if u.o.FinalizerWait <= 0 {
		return usageError{fmt.Errorf("--finalizer-wait %s: must be positive", u.o.FinalizerWait)}
	}
	if u.o.Force && !u.o.Purge {
		return usageError{fmt.Errorf("--force only overrides --purge's refusal: pass it with --purge")}
	}
	return nil
}

// question is what uninstall asks before it writes: what --purge and --force add to it included.
func (u *uninstallCmd) question() string {
	what := "Uninstall the GPU stack gpuctl installed"
	if u.o.Purge {
		what += ", and delete the CRDs and namespaces it created (a namespace that holds anything gpuctl did not create stays)"
		if u.o.Force {
			what += ", custom resources gpuctl did not create included"
		}
	}
	return what + "?"
}

// writeResult writes the uninstall's result as -o asks; as text, ui.PrintUninstall.
func (u *uninstallCmd) writeResult(res *engine.UninstallResult, runErr error) error {
	return writeResult(u.streams.Out, u.output, res, func() error { return ui.PrintUninstall(u.streams.Out, res, runErr) })
}
