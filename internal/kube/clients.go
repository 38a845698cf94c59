package kube

import (
	"fmt"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// FieldManager is the name gpuctl's server-side applies and patches are recorded under.
const FieldManager = "gpuctl"

// Clients bundles the clients gpuctl uses, all built from the same kubeconfig and flags.
type Clients struct {
	Getter     genericclioptions.RESTClientGetter
	Config     *rest.Config
	Kube       kubernetes.Interface
	Dynamic    dynamic.Interface
	Discovery  discovery.DiscoveryInterface
	Extensions apiextensionsclient.Interface
	Mapper     meta.RESTMapper
	// Namespace is the namespace gpuctl installs into (-n, default gpu-operator).
	Namespace string
}

// NewClients builds the bundle from kubectl-style flags (--kubeconfig, --context, -n, …).
func NewClients(getter genericclioptions.RESTClientGetter, namespace string) (*Clients, error) {
	cfg, err := getter.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	// gpuctl lists and watches every node at once; the default 5 QPS would throttle large clusters.
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := getter.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	mapper, err := getter.ToRESTMapper()
	if err != nil {
		return nil, err
	}
	return &Clients{Getter: getter, Config: cfg, Kube: kc, Dynamic: dyn, Discovery: disc, Extensions: ext, Mapper: mapper, Namespace: namespace}, nil
}

// Refresh forgets cached discovery and REST mappings, after CRDs were created or changed: the same
// cached clients serve Helm (through Getter), which would otherwise not know the new kinds.
func (c *Clients) Refresh() {
	if cd, ok := c.Discovery.(discovery.CachedDiscoveryInterface); ok {
		cd.Invalidate()
	}
	if rm, ok := c.Mapper.(meta.ResettableRESTMapper); ok {
		rm.Reset()
	}
}
