package cli

import (
	"fmt"
	"net/url"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpuctl/gpuctl/internal/render"
)

func newChartsCmd(streams Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "charts",
		Short: "Publish gpuctl's embedded charts where a GitOps engine can pull them",
	}
	var baseURL string
	save := &cobra.Command{
		Use:   "save DIR",
		Short: "Write the embedded charts into DIR as a Helm chart repository (archives and index.yaml)",
		Long: `Write the embedded charts into DIR as a Helm chart repository: one archive per chart (the
gpu-operator chart once per GPU Operator release gpuctl installs, versioned as the release) and an
index.yaml, as helm repo index writes it. Serve DIR at the URL gpuctl export --chart-repo names.
Archives already in DIR stay listed in the index.`,
		Example: "  gpuctl charts save ./repo --url https://charts.example.com/gpuctl",
		Args:    cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if baseURL != "" {
				if u, err := url.Parse(baseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return usageError{fmt.Errorf("--url %s: want the http(s) URL the repository is served at", baseURL)}
				}
			}
			saved, err := render.SaveRepository(args[0], baseURL)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(streams.Out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "CHART\tVERSION\tFILE\tDIGEST")
			for _, s := range saved {
				fmt.Fprintf(tw, "%s\t%s\t%s\tsha256:%s\n", s.Name, s.Version, s.File, s.Digest)
			}
			return tw.Flush()
		},
	}
	save.Flags().StringVar(&baseURL, "url", "", "the http(s) URL DIR is served at, for index.yaml's chart URLs (default: URLs relative to index.yaml)")
	cmd.AddCommand(save, newChartsPushCmd(streams))
	return cmd
}

func newChartsPushCmd(streams Streams) *cobra.Command {
	var o render.PushOptions
	var dryRun bool
	var output string
	cmd := &cobra.Command{
		Use:   "push oci://HOST/PATH",
		Short: "Push the embedded charts to an OCI registry path, as helm push does",
		Long: `Push the embedded charts to an OCI registry under HOST/PATH, each as NAME:VERSION (the gpu-operator
chart once per GPU Operator release gpuctl installs, versioned as the release), with Helm's registry
client. Each archive is the one gpuctl charts save writes, byte for byte: the same digest, and the chart
gpuctl installs. Point gpuctl export --chart-repo at the same oci:// path. Credentials are Helm's
(helm registry login, or --registry-config); --dry-run lists what would be pushed and pushes nothing.`,
		Example: `  gpuctl charts push oci://registry.example.com/gpuctl --dry-run
  gpuctl charts push oci://localhost:5000/gpuctl --plain-http`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFlag(output, "", "json"); err != nil {
				return err
			}
			if _, err := render.OCIRepository(args[0]); err != nil {
				return usageError{err}
			}
			var charts []render.PushedChart
			var err error
			if dryRun {
				charts, _, err = render.PushPlan(args[0])
			} else {
				charts, err = render.Push(cmd.Context(), args[0], o)
			}
			if err != nil {
				return err
			}
			return writeResult(streams.Out, output, charts, func() error {
				tw := tabwriter.NewWriter(streams.Out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "CHART\tVERSION\tREFERENCE\tDIGEST")
				for _, c := range charts {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, c.Version, c.Reference, c.Digest)
				}
				return tw.Flush()
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.PlainHTTP, "plain-http", false, "talk HTTP to the registry, not HTTPS (a lab registry)")
	f.BoolVar(&o.InsecureSkipTLSVerify, "insecure-skip-tls-verify", false, "accept any certificate the registry presents")
	f.StringVar(&o.RegistryConfig, "registry-config", "", "Helm's registry credentials file (default: Helm's, where helm registry login writes)")
	f.BoolVar(&dryRun, "dry-run", false, "list what would be pushed (name, version, reference, digest) and push nothing")
	f.StringVarP(&output, "output", "o", "", "output format: json (default: a table)")
	return cmd
}
