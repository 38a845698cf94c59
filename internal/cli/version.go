package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/gpuctl/gpuctl/charts"
	"github.com/gpuctl/gpuctl/internal/release"
)

// version is set at link time by the release build (-X github.com/gpuctl/gpuctl/internal/cli.version=v1.2.3).
var version = ""

func newVersionCmd(streams Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print gpuctl's version and the versions of its embedded charts",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintf(streams.Out, "gpuctl %s\n", gpuctlVersion())
			for _, name := range charts.Names() {
				ch, err := release.LoadChart(charts.FS, name)
				if err != nil {
					return err
				}
				fmt.Fprintf(streams.Out, "chart %s %s (app %s)\n", ch.Metadata.Name, ch.Metadata.Version, ch.Metadata.AppVersion)
			}
			return nil
		},
	}
}

// gpuctlVersion is this binary's version: the link-time one, else the module's, else "(devel)".
func gpuctlVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
