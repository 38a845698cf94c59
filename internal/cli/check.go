package cli

import (
	"errors"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuctl/gpuctl/internal/driverimage"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/ui"
)

// checkCmd is gpuctl check: its flags and what it runs with.
type checkCmd struct {
	streams Streams
	g       *globals
	getenv  func(string) string
	o       engine.InstallOptions
	output  string
	pre     bool
	skip    []string
}

func newCheckCmd(streams Streams, g *globals, getenv func(string) string) *cobra.Command {
	c := &checkCmd{streams: streams, g: g, getenv: getenv}
	cmd := &cobra.Command{
		Use:   "check --pre",
		Short: "Check that gpuctl can install on this cluster, changing nothing",
		Long: `check --pre runs the checks gpuctl install runs before its first write: the API answers, you hold
every permission the install needs, the Kubernetes, OpenShift and containerd versions are ones the GPU
Operator release supports, no other GPU operator, ClusterPolicy or device plugin is in the way, the GPU
nodes' drivers and OS fit the plan, the toolkit's containerd settings fit the distribution, with
driver.usePrecompiled=true the registry the driver image comes from (NVIDIA's, or --registry) has an image
for every GPU node's kernel (with --precompiled auto, for the kernels the plan gives it to), Pod Security
admits the operands, and the GPU taint strands nothing. --timeout bounds it all; a registry that does
not answer in time is a warning.

A failed check exits with code 5. Give the same flags as for install (--profile, -f, --set, the
operator release, the channel, --sharing, --mig, --dra, --precompiled, --monitoring, the licensing
inputs): the checks judge the plan they make.`,
		Example: `  gpuctl check --pre
  gpuctl check --pre --profile gke -f my-values.yaml
  gpuctl check --pre -o json --skip-check host-driver
  gpuctl check --pre --set driver.usePrecompiled=true --set driver.version=595 --registry mirror.example:5000`,
		Args: cobra.NoArgs,
		RunE: c.run,
	}
	c.addFlags(cmd.Flags())
	return cmd
}

// addFlags declares check's flags: --pre and --skip-check, install's render and licensing flags,
// then its own timeout and output.
func (c *checkCmd) addFlags(f *pflag.FlagSet) {
	f.BoolVar(&c.pre, "pre", false, "run the pre-install checks (required; checks of an installed stack come later)")
	f.StringSliceVar(&c.skip, "skip-check", nil, "a check not to run, by ID; repeatable or comma-separated. IDs: "+checkIDs())
	addRenderFlags(f, &c.o, installProfileHelp)
	addLicensingFlags(f, &c.o.Licensing)
	f.DurationVar(&c.o.Timeout, "timeout", engine.DefaultCheckTimeout, "how long the checks may take; a registry that does not answer within "+driverimage.DefaultTimeout.String()+" (or half of what is left) is a warning")
	f.StringVarP(&c.output, "output", "o", "text", "result format: text, json")
}

// run judges the inputs, runs the pre-install checks on the plan they make and prints their report;
// a failed check is its error.
func (c *checkCmd) run(cmd *cobra.Command, _ []string) error {
	if err := c.validate(); err != nil {
		return err
	}
	clients, err := c.g.clients()
	if err != nil {
		return err
	}
	res, err := (&engine.Check{Clients: clients, Options: c.o, Skip: c.skip, Timeout: c.o.Timeout}).Run(cmd.Context())
	if res != nil && len(res.Report.Results) > 0 {
		var werr error
		if c.output == "json" {
			werr = writeJSON(c.streams.Out, res.Report)
		} else {
			werr = ui.PrintPreflight(c.streams.Out, res.Report, ui.DetectStyle(c.streams.Out, c.getenv).Color)
		}
		if werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

// validate judges the flags before anything is read: --pre, -o, the check IDs, install's inputs
// and the timeout.
func (c *checkCmd) validate() error {
	if !c.pre {
		return usageError{errors.New("check needs --pre: only the pre-install checks exist so far")}
	}
	if err := outputFlag(c.output, "text", "json"); err != nil {
		return err
	}
	if err := (&preflight.Runner{Skip: c.skip}).Validate(); err != nil {
		return usageError{err}
	}
	if err := validateInstallOptions(&c.o); err != nil {
		return err
	}
	return validateTimeout(c.o.Timeout)
}

// checkIDs lists the preflight checks' IDs for flag help.
func checkIDs() string {
	var ids []string
	for _, c := range preflight.Checks() {
		ids = append(ids, c.ID)
	}
	return strings.Join(ids, ", ")
}
