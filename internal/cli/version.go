package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	k8sversion "k8s.io/apimachinery/pkg/version"

	"github.com/gpuctl/gpuctl/charts"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/release"
)

// version, commit and date are set at link time by the release build (.goreleaser.yaml:
// -X github.com/gpuctl/gpuctl/internal/cli.version=v1.2.3 and so on). Otherwise they come from the
// Go build information (go install …@v1.2.3, or a build in a git checkout).
var version, commit, date = "", "", ""

// Version is what gpuctl version prints with -o json|yaml, shaped as kubectl version -o json is:
// gpuctl's own version and the charts built into it, and the API server's version unless --client.
type Version struct {
	ClientVersion ClientVersion `json:"clientVersion"`
	// ServerVersion is the API server's answer to GET /version; absent with --client or when the
	// server could not be asked.
	ServerVersion *k8sversion.Info `json:"serverVersion,omitempty"`
}

// ClientVersion is gpuctl's build and the charts it carries.
type ClientVersion struct {
	GitVersion string `json:"gitVersion"`
	GitCommit  string `json:"gitCommit,omitempty"`
	// GitTreeState is "dirty" for a build of a checkout with changes, "clean" for one without.
	GitTreeState string         `json:"gitTreeState,omitempty"`
	BuildDate    string         `json:"buildDate,omitempty"`
	GoVersion    string         `json:"goVersion"`
	Platform     string         `json:"platform"`
	Charts       []ChartVersion `json:"charts"`
}

// ChartVersion is one chart built into gpuctl.
type ChartVersion struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}

func newVersionCmd(streams Streams, g *globals) *cobra.Command {
	var output string
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print gpuctl's version, its embedded charts' versions and the Kubernetes API server's",
		Long: `Print gpuctl's version and the versions of its embedded charts, and the version of the Kubernetes
API server the kubeconfig names (--client leaves it out). An API server that cannot be reached is
one line on stderr and exit code 9, after gpuctl's own version.`,
		Example: `  gpuctl version
  gpuctl version --client -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFlag(output, "text", "json", "yaml"); err != nil {
				return err
			}
			v, err := clientVersion()
			if err != nil {
				return err
			}
			var serverErr error
			if !clientOnly {
				// Like kubectl version: gpuctl's own version is printed whatever the server says.
				var clients *kube.Clients
				if clients, serverErr = kube.NewClients(g.kube, *g.kube.Namespace); serverErr == nil {
					v.ServerVersion, serverErr = clients.ServerVersion(cmd.Context())
				}
			}
			if err := writeResult(streams.Out, output, v, func() error { return printVersion(streams.Out, v) }); err != nil {
				return err
			}
			return serverErr
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json, yaml")
	cmd.Flags().BoolVar(&clientOnly, "client", false, "gpuctl's version only: do not ask the API server")
	return cmd
}

// clientVersion is gpuctl's build and its charts' versions.
func clientVersion() (*Version, error) {
	v, c, d := buildVersion()
	cv := ClientVersion{GitVersion: v, BuildDate: d, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if c != "" {
		cv.GitCommit, cv.GitTreeState = c, "clean"
		if trimmed, ok := strings.CutSuffix(c, modifiedSuffix); ok {
			cv.GitCommit, cv.GitTreeState = trimmed, "dirty"
		}
	}
	for _, name := range charts.Names() {
		ch, err := release.LoadChart(charts.FS, name)
		if err != nil {
			return nil, err
		}
		cv.Charts = append(cv.Charts, ChartVersion{Name: ch.Metadata.Name, Version: ch.Metadata.Version, AppVersion: ch.Metadata.AppVersion})
	}
	return &Version{ClientVersion: cv}, nil
}

// printVersion writes v as text, one line each: gpuctl, its commit, its charts, the server.
func printVersion(w io.Writer, v *Version) error {
	cv := v.ClientVersion
	fmt.Fprintf(w, "gpuctl %s\n", cv.GitVersion)
	commit := cv.GitCommit
	if cv.GitTreeState == "dirty" {
		commit += modifiedSuffix
	}
	switch {
	case commit != "" && cv.BuildDate != "":
		fmt.Fprintf(w, "commit %s of %s\n", commit, cv.BuildDate)
	case commit != "":
		fmt.Fprintf(w, "commit %s\n", commit)
	}
	for _, ch := range cv.Charts {
		fmt.Fprintf(w, "chart %s %s (app %s)\n", ch.Name, ch.Version, ch.AppVersion)
	}
	if v.ServerVersion != nil {
		fmt.Fprintf(w, "server Kubernetes %s\n", v.ServerVersion.GitVersion)
	}
	return nil
}

// modifiedSuffix marks the commit of a build from a checkout with changes.
const modifiedSuffix = " (modified)"

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
			c += modifiedSuffix
		}
	}
	return v, c, d
}

// gpuctlVersion is this binary's version, as the install record states it.
func gpuctlVersion() string {
	v, _, _ := buildVersion()
	return v
}
