package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/export"
)

// exportCmd is gpuctl export: its flags and what it runs with.
type exportCmd struct {
	streams Streams
	g       *globals
	o       engine.InstallOptions
	x       export.Export
	// engineName is --for; dir is --output-dir.
	engineName, dir string
}

func newExportCmd(streams Streams, g *globals) *cobra.Command {
	ex := &exportCmd{streams: streams, g: g}
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write the install for a GitOps engine: Flux HelmReleases, Argo CD Applications, RKE2 HelmCharts",
		Long: `Write what gpuctl would install as objects a GitOps engine applies, with exactly the values an
install would use, in gpuctl's order: the namespace and platform prerequisites first, then Flux
HelmReleases (--for flux), Argo CD Applications (--for argocd; ApplicationSets over many clusters
with --fleet) or RKE2/k3s HelmCharts (--for rke2) pulling gpuctl's charts from --chart-repo. With
--profile it works offline; without it, it detects the cluster. What an engine cannot do (taint
nodes, label them, create NVIDIA AI Enterprise Secrets) is written as comments and to stderr. Cluster
API's HelmChartProxy is not exported (docs/gitops.md#cluster-api).

It takes install's flags that change what is installed (--sharing, --mig, --dra, --precompiled,
--monitoring, the taint, the values and image flags, ...) with install's meaning. What an install
decides from the cluster (the pools, the GPUs' MIG, the nodes' kernels) is read from it; offline the
closest is exported, and each assumption is a note.`,
		Example: `  gpuctl export --for flux --profile gke --chart-repo oci://registry.example.com/gpuctl > gpu-stack.yaml
  gpuctl export --for flux --sharing time-slicing=4 --chart-repo oci://registry.example.com/gpuctl > gpu-stack.yaml
  gpuctl export --for argocd --profile kubeadm --chart-repo https://charts.example.com -o clusters/lab/gpu
  gpuctl export --for argocd --fleet --cluster-selector gpu=nvidia --profile kubeadm --chart-repo https://charts.example.com
  gpuctl export --for rke2 --profile rke2 --chart-repo https://charts.example.com -o /var/lib/rancher/rke2/server/manifests/gpu`,
		Args: cobra.NoArgs,
		RunE: ex.run,
	}
	ex.addFlags(cmd.Flags())
	return cmd
}

// addFlags declares export's flags: its own, then the render and licensing flags with install's
// meaning.
func (ex *exportCmd) addFlags(f *pflag.FlagSet) {
	x := &ex.x
	f.StringVar(&ex.engineName, "for", "", "GitOps engine to write for: flux, argocd or rke2 (RKE2 and k3s)")
	f.StringVar(&x.ChartRepo, "chart-repo", "", "where the engine pulls gpuctl's charts: an http(s) chart repository or an oci:// registry path")
	f.BoolVar(&x.PlainHTTP, "plain-http", false, "the oci:// registry of --chart-repo speaks HTTP without TLS (a lab registry)")
	f.StringVarP(&ex.dir, "output-dir", "o", "", "write one file per object into this directory, numbered in apply order (default: one YAML stream on stdout)")
	f.StringVar(&x.ArgoCDNamespace, "argocd-namespace", export.DefaultArgoCDNamespace, "Argo CD: the namespace of its Applications")
	f.BoolVar(&x.Fleet, "fleet", false, "Argo CD: an ApplicationSet per release over the clusters Argo CD manages, instead of Applications for its own cluster")
	f.StringToStringVar(&x.ClusterSelector, "cluster-selector", nil, "Argo CD --fleet: only the clusters whose Argo CD cluster Secret has these labels (key=value,...; default every cluster)")
	addRenderFlags(f, &ex.o, offlineProfileHelp)
	addLicensingFlags(f, &ex.o.Licensing)
}

// run judges the inputs, plans the install (offline with --profile, else from the cluster), writes
// its export and says on stderr what the engine cannot do.
func (ex *exportCmd) run(cmd *cobra.Command, _ []string) error {
	ex.x.Engine = export.Engine(ex.engineName)
	if err := ex.x.Validate(); err != nil {
		return usageError{err}
	}
	if err := validateRenderOptions(&ex.o); err != nil {
		return err
	}
	t := &engine.Template{Namespace: *ex.g.kube.Namespace, Options: ex.o}
	if ex.o.Profile == "" {
		clients, err := ex.g.clients()
		if err != nil {
			return err
		}
		t.Clients = clients
	}
	p, err := t.Plan(cmd.Context())
	if err != nil {
		return err
	}
	res, err := ex.x.Run(p)
	if err != nil {
		return err
	}
	if err := ex.write(res); err != nil {
		return err
	}
	for _, n := range res.Notes {
		fmt.Fprintf(ex.streams.Err, "not exported: %s\n", n)
	}
	return nil
}

// write writes the export as one YAML stream on stdout or, with --output-dir, as a file per object.
func (ex *exportCmd) write(res *export.Result) error {
	if ex.dir == "" {
		out, err := res.Stream()
		if err != nil {
			return err
		}
		_, err = ex.streams.Out.Write(out)
		return err
	}
	files, err := res.WriteDir(ex.dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(ex.streams.Err, "wrote %d files to %s\n", len(files), ex.dir)
	return nil
}
