package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/gpuctl/gpuctl/charts"
	"github.com/gpuctl/gpuctl/internal/release"
)

// version, commit and date are set at link time by the release build (.goreleaser.yaml:
// -X github.com/gpuctl/gpuctl/internal/cli.version=v1.2.3 and so on). Otherwise they come from the
// Go build information (go install …@v1.2.3, or a build in a git checkout).
var version, commit, date = "", "", ""

func newVersionCmd(streams Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print gpuctl's version and the versions of its embedded charts",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v, c, d := buildVersion()
			fmt.Fprintf(streams.Out, "gpuctl %s\n", v)
			switch {
			case c != "" && d != "":
				fmt.Fprintf(streams.Out, "commit %s of %s\n", c, d)
			case c != "":
				fmt.Fprintf(streams.Out, "commit %s\n", c)
			}
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

// buildVersion is gpuctl's version, commit and commit date: stamped by the release build, else read
// from the Go build information ("(devel)" when there is none).
func buildVersion() (v, c, d string) {
	v, c, d = version, commit, date
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if v == "" {
			v = "(devel)"
		}
		return v, c, d
	}
	if v == "" {
		v = bi.Main.Version
		if v == "" {
			v = "(devel)"
		}
	}
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && c == "":
			c = s.Value
		case s.Key == "vcs.time" && d == "":
			d = s.Value
		case s.Key == "vcs.modified" && s.Value == "true" && commit == "":
			c += " (modified)"
		}
	}
	return v, c, d
}

// gpuctlVersion is this binary's version, as the install record states it.
func gpuctlVersion() string {
	v, _, _ := buildVersion()
	return v
}
