package cli

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/ui"
)

func newImagesCmd(streams Streams, g *globals) *cobra.Command {
	var o engine.InstallOptions
	var output, kubeVersion string
	var nodeOS []string
	cmd := &cobra.Command{
		Use:   "images",
		Short: "List every image an install would pull, from the rendered charts and ClusterPolicy",
		Long: `List every image an install would pull: the images of the rendered charts' workloads, and the
operand images the operator of the chosen release deploys for the rendered ClusterPolicy (driver per
node OS, toolkit, device plugin, DCGM, validator, GFD, MIG manager, ...). With --profile it works
offline and lists OS-specific images for --node-os (Ubuntu 22.04 and 24.04 by default); without it,
it detects the cluster and uses the GPU nodes' OSes. See docs/air-gap.md.`,
		Example: `  gpuctl images --profile kubeadm
  gpuctl images --profile kubeadm --node-os rhel9 -o json | jq -r '.images[].image'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFlag(output, "text", "json", "yaml"); err != nil {
				return err
			}
			if err := validateValuesOptions(&o); err != nil {
				return err
			}
			if err := plan.CheckPrecompiled(o.Precompiled); err != nil {
				return usageError{err}
			}
			if err := validateNodeOS(nodeOS); err != nil {
				return err
			}
			im := &engine.Images{Namespace: *g.kube.Namespace, Options: o, KubeVersion: kubeVersion, NodeOS: nodeOS}
			if o.Profile == "" {
				clients, err := g.clients()
				if err != nil {
					return err
				}
				im.Clients = clients
			}
			list, err := im.Run(cmd.Context())
			if err != nil {
				return err
			}
			return writeResult(streams.Out, output, list, func() error { return ui.PrintImages(streams.Out, list) })
		},
	}
	f := cmd.Flags()
	addValuesFlags(f, &o, "values profile; with it no cluster is needed")
	f.BoolVar(&o.NoTaint, "no-taint", false, "list as for an install without the taint")
	f.BoolVar(&o.Taint, "taint", false, "list as for an install with --taint")
	f.StringVar(&o.OperatorVersion, "operator-version", "", "GPU operator release: v26.7.0 (default), v26.3.3 or v25.10.1")
	f.StringVar(&o.Precompiled, "precompiled", "", "list as for an install with --precompiled auto: the precompiled images of the GPU nodes' kernels the registry has, the compiled driver for the rest")
	f.StringSliceVar(&nodeOS, "node-os", nil, "node OS tags to list the driver images for, as the operator tags them (ubuntu22.04, ubuntu24.04, rhel9, rhcos4.18); default: the GPU nodes' own, or ubuntu22.04,ubuntu24.04 with --profile")
	f.StringVar(&kubeVersion, "kube-version", "", "Kubernetes version for the charts' capabilities (offline)")
	f.StringVarP(&output, "output", "o", "text", "output format: text, json, yaml")
	return cmd
}

// validateNodeOS refuses a --node-os that cannot be part of an image tag: the operator appends
// "-<ID><VERSION_ID>" of the node's os-release ("ubuntu22.04").
func validateNodeOS(tags []string) error {
	re := regexp.MustCompile(`^[a-z]+[0-9]+(\.[0-9]+)?$`)
	for _, t := range tags {
		if !re.MatchString(t) {
			return usageError{fmt.Errorf("--node-os %q: want an OS tag as the driver images use, e.g. ubuntu22.04, rhel9, rhcos4.18", t)}
		}
	}
	return nil
}

// addImageFlags adds the air-gap flags that change where images come from; addValuesFlags adds them,
// so install, check --pre, template and images all take them.
func addImageFlags(f *pflag.FlagSet, o *engine.InstallOptions) {
	f.StringVar(&o.Registry, "registry", "", "pull every image from this mirror, keeping its path (nvcr.io/nvidia/gpu-operator → MIRROR/nvidia/gpu-operator); -f and --set still win. See docs/air-gap.md")
	f.StringArrayVar(&o.ImagePullSecrets, "image-pull-secret", nil, "Secret in the install namespace to pull every image with (the operator, each ClusterPolicy operand, NFD); repeatable")
}

// validateImageOptions judges --registry and --image-pull-secret (a Secret's name is a DNS-1123
// subdomain, k8s.io/apimachinery/pkg/api/validation NameIsDNSSubdomain).
func validateImageOptions(o *engine.InstallOptions) error {
	for _, n := range o.ImagePullSecrets {
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			return usageError{fmt.Errorf("--image-pull-secret %q is not a valid Secret name: %s", n, strings.Join(errs, "; "))}
		}
	}
	if o.Registry != "" {
		if err := plan.ValidateRegistry(o.Registry); err != nil {
			return usageError{err}
		}
	}
	return nil
}
