package cli

import (
	"github.com/spf13/cobra"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/ui"
)

func newDetectCmd(streams Streams, g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "detect",
		Short: "Show the distribution (and why), the GPU nodes (and why), node pools, and what is already installed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFlag(output, "table", "json", "yaml"); err != nil {
				return err
			}
			clients, err := g.clients()
			if err != nil {
				return err
			}
			res, err := detect.Run(cmd.Context(), detect.From(clients))
			if err != nil {
				return err
			}
			return writeResult(streams.Out, output, res, func() error { return ui.PrintDetection(streams.Out, res) })
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json, yaml")
	return cmd
}
