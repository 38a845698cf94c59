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
	cmd.AddCommand(save)
	return cmd
}
