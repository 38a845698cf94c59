package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/support"
	"github.com/gpuctl/gpuctl/internal/ui"
)

func newDiagnoseCmd(streams Streams, g *globals) *cobra.Command {
	var output string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "diagnose",
		Short: "Write a support bundle (tar.gz) of the GPU stack, with credentials redacted",
		Long: `diagnose collects what a support engineer needs into one tar.gz: versions (gpuctl, Kubernetes, the
operator, the driver per GPU node), the install record, Helm release history and values, ClusterPolicy
and NVIDIADriver objects, pods, DaemonSets, Deployments, events and container logs in the operator's and
NFD's namespaces, the GPU nodes, and the output of gpuctl status and gpuctl check --pre. It changes
nothing.

Secrets' data is never read; anything that looks like a credential (NGC keys, tokens, passwords,
private keys, registry auths) is redacted, and manifest.json says what was redacted in which file.
What you may not read is noted in the manifest and the rest is collected: the bundle is written
(exit 0) unless nothing could be written at all.`,
		Example: `  gpuctl diagnose
  gpuctl diagnose -o support.tar.gz
  gpuctl diagnose -o - | tar -tzf -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDiagnose(cmd.Context(), streams, g, output, timeout)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "", "the bundle's file, a .tar.gz (default gpuctl-diagnose-<UTC time>.tar.gz here); - writes it to standard output")
	f.DurationVar(&timeout, "timeout", engine.DefaultSupportTimeout, "how long the whole collection may take; what is not read by then is noted in the manifest")
	return cmd
}

// runDiagnose collects the support bundle and writes it to output (a .tar.gz file, or - for standard
// output, when the summary goes to standard error), then prints what is in it and what is not.
func runDiagnose(ctx context.Context, streams Streams, g *globals, output string, timeout time.Duration) error {
	if err := validateTimeout(timeout); err != nil {
		return err
	}
	now := time.Now().UTC()
	output, dir, err := bundleNames(output, now)
	if err != nil {
		return err
	}
	clients, err := g.clients()
	if err != nil {
		return err
	}
	res, err := collectSupport(ctx, clients, timeout, now)
	if err != nil {
		return err
	}
	summary := streams.Out
	var m support.Manifest
	if output == "-" {
		summary = streams.Err
		if m, err = res.Bundle.Write(streams.Out, dir, now); err != nil {
			return fmt.Errorf("write the bundle to standard output: %w", err)
		}
	} else if m, err = writeBundleFile(res.Bundle, output, dir, now); err != nil {
		return err
	}
	printBundleSummary(summary, output, m)
	return nil
}

// bundleNames are the bundle's file (-o, default gpuctl-diagnose-<UTC time>.tar.gz) and the directory
// its files sit under in the archive (the file's name without .tar.gz). A file that is not a .tar.gz
// or .tgz is refused.
func bundleNames(output string, now time.Time) (file, dir string, err error) {
	dir = "gpuctl-diagnose-" + now.Format("20060102T150405Z")
	if output == "" {
		output = dir + ".tar.gz"
	}
	if output != "-" {
		if !strings.HasSuffix(output, ".tar.gz") && !strings.HasSuffix(output, ".tgz") {
			return "", "", usageError{fmt.Errorf("-o %s: the bundle is a .tar.gz (or - for standard output)", output)}
		}
		dir = strings.TrimSuffix(strings.TrimSuffix(filepath.Base(output), ".tar.gz"), ".tgz")
	}
	return output, dir, nil
}

// collectSupport reads the bundle's contents from the cluster, with status and check --pre as their
// plain text.
func collectSupport(ctx context.Context, clients *kube.Clients, timeout time.Duration, now time.Time) (*engine.SupportResult, error) {
	v, _, _ := buildVersion()
	plain := ui.Style{}
	return (&engine.Support{
		Clients: clients, APIVersion: APIVersion, GpuctlVersion: v, Timeout: timeout,
		StatusText: func(w io.Writer, r *engine.StatusResult) error { return ui.PrintStatus(w, r, plain) },
		CheckText:  func(w io.Writer, r preflight.Report) error { return ui.PrintPreflight(w, r, false) },
		Now:        func() time.Time { return now },
	}).Run(ctx)
}

// writeBundleFile writes the bundle beside its destination and renames it into place, so a failed
// write leaves no half-written bundle.
func writeBundleFile(b *support.Bundle, output, dir string, now time.Time) (support.Manifest, error) {
	tmp, err := os.CreateTemp(filepath.Dir(output), ".gpuctl-diagnose-*.tmp")
	if err != nil {
		return support.Manifest{}, fmt.Errorf("write the bundle: %w", err)
	}
	m, err := b.Write(tmp, dir, now)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), output)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return m, fmt.Errorf("write the bundle %s: %w", output, err)
	}
	return m, nil
}

// printBundleSummary says where the bundle went, how much was redacted, and what is missing from it.
func printBundleSummary(w io.Writer, output string, m support.Manifest) {
	if output == "-" {
		output = "standard output"
	}
	redacted := 0
	for _, r := range m.Redactions {
		redacted += r.Count
	}
	fmt.Fprintf(w, "Wrote %s: %d files, %d values redacted in %d places.\n", output, len(m.Files)+1, redacted, len(m.Redactions))
	if len(m.Forbidden) > 0 {
		fmt.Fprintf(w, "Not allowed to read (%d), so not in the bundle:\n", len(m.Forbidden))
		for _, p := range m.Forbidden {
			fmt.Fprintf(w, "  %s\n", p.What)
		}
	}
	if len(m.Errors) > 0 {
		fmt.Fprintf(w, "Could not read (%d), see manifest.json:\n", len(m.Errors))
		for i, p := range m.Errors {
			if i == 10 {
				fmt.Fprintf(w, "  … and %d more\n", len(m.Errors)-i)
				break
			}
			fmt.Fprintf(w, "  %s\n", p.What)
		}
	}
	if len(m.Forbidden)+len(m.Errors) > 0 {
		fmt.Fprintln(w, "The bundle holds everything else; manifest.json lists what is missing and why.")
	}
}
