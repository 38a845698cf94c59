package cli

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
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
it detects the cluster and uses the GPU nodes' OSes. See docs/air-gap.md.

It takes install's flags that change what is installed (--sharing, --mig, --dra, --precompiled,
--monitoring, ...) with install's meaning, so the list is the images of the install with the same
flags; offline, what needs the cluster is assumed, and the notes say what.`,
		Example: `  gpuctl images --profile kubeadm
  gpuctl images --profile kubeadm --node-os rhel9 -o json | jq -r '.images[].image'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFlag(output, "text", "json", "yaml"); err != nil {
				return err
			}
			if err := validateRenderOptions(&o); err != nil {
				return err
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
	addRenderFlags(f, &o, offlineProfileHelp)
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
