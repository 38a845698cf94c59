package cli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/gpuctl/gpuctl/internal/engine"
)

func newTemplateCmd(streams Streams, g *globals) *cobra.Command {
	var o engine.InstallOptions
	var kubeVersion string
	cmd := &cobra.Command{
		Use:   "template",
		Short: "Render every chart in install order, with the values an install would use",
		Long: `Render every chart in install order, with the values an install would use. With --profile it
works offline (use --kube-version for the cluster's version); without it, it detects the cluster.`,
		Example: "  gpuctl template --profile gke --kube-version 1.33 > gpu-stack.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateValuesOptions(&o); err != nil {
				return err
			}
			t := &engine.Template{Namespace: *g.kube.Namespace, Options: o, KubeVersion: kubeVersion}
			if o.Profile == "" {
				clients, err := g.clients()
				if err != nil {
					return err
				}
				t.Clients = clients
			}
			out, _, err := t.Run(cmd.Context())
			if err != nil {
				return err
			}
			_, err = io.WriteString(streams.Out, out)
			return err
		},
	}
	f := cmd.Flags()
	addValuesFlags(f, &o, "values profile; with it no cluster is needed")
	f.BoolVar(&o.NoTaint, "no-taint", false, "render as for an install without the taint")
	f.BoolVar(&o.Taint, "taint", false, "render as for an install with --taint")
	f.StringVar(&o.OperatorVersion, "operator-version", "", "GPU operator release to render: its templates, CRDs and images (v26.7.0 by default, v26.3.3 or v25.10.1)")
	f.StringVar(&kubeVersion, "kube-version", "", "Kubernetes version for the charts' capabilities (offline)")
	return cmd
}
