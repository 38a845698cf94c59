package cli

import (
	"fmt"
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
works offline (use --kube-version for the cluster's version); without it, it detects the cluster.

It takes install's flags that change what is installed (--sharing, --mig, --dra, --precompiled,
--monitoring, the taint, the values and image flags, ...) with install's meaning: the render is the
plan an install with the same flags would make. What an install decides from the cluster (the pools,
the GPUs' MIG, the nodes' kernels) is read from it; offline the closest is rendered, and each
assumption is a warning on stderr, as is everything the plan warns of. Node labels an install sets
(--sharing per pool, --mig) are not objects of the render: the warnings name them.`,
		Example: `  gpuctl template --profile gke --kube-version 1.33 > gpu-stack.yaml
  gpuctl template --profile kubeadm --sharing time-slicing=4 --monitoring`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateRenderOptions(&o); err != nil {
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
			out, p, err := t.Run(cmd.Context())
			if err != nil {
				return err
			}
			for _, w := range p.Warnings {
				fmt.Fprintf(streams.Err, "warning: %s\n", w)
			}
			_, err = io.WriteString(streams.Out, out)
			return err
		},
	}
	f := cmd.Flags()
	addRenderFlags(f, &o, offlineProfileHelp)
	f.StringVar(&kubeVersion, "kube-version", "", "Kubernetes version for the charts' capabilities (offline)")
	return cmd
}
