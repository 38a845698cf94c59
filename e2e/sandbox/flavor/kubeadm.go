package flavor

import (
	"cmp"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// kubeadmFlavor is upstream Kubernetes installed with kubeadm on Ubuntu servers with containerd: the
// fallback when no platform signal matches (replicatedhq/troubleshoot pkg/analyze/distribution.go). Its one mark is the
// ConfigMap kube-system/kubeadm-config; control-plane nodes carry kubeadm's role label and taint.
func kubeadmFlavor() Flavor {
	ubuntu2204 := ubuntu("22.04.5", "5.15.0-153-generic")
	return Flavor{
		Name:        "kubeadm",
		Description: "upstream Kubernetes installed with kubeadm (Ubuntu 22.04, containerd)",
		// kubeadm adds NodeRestriction to upstream's defaults and nothing else
		// (kubernetes/kubernetes cmd/kubeadm/app/phases/controlplane/manifests.go@v1.37.2), and upstream
		// leaves ExtendedResourceToleration off (pkg/kubeapiserver/options/plugins.go@v1.37.2).
		AdmissionPlugins: []string{"NodeRestriction"},
		Nodes: func(s Scenario) []SimNode {
			s = s.Defaults()
			node := func(r role, i int) nodeSpec {
				n := nodeSpec{
					os:      ubuntu2204,
					runtime: "containerd://2.1.4",
					kubelet: s.KubeletVersion,
					// kubeadm records the CRI socket of every node it sets up.
					annotations: map[string]string{"kubeadm.alpha.kubernetes.io/cri-socket": "unix:///var/run/containerd/containerd.sock"},
				}
				switch r {
				case controlPlane:
					n.name, n.machine = "kube-cp-1", server(8, 32)
					n.labels, n.taints = kubeadmControlPlane(s.kubeMinor())
				case gpuWorker:
					n.name, n.machine = fmt.Sprintf("gpu-worker-%d", i+1), gpuServer(standin.GPUH100SXM80, s.GPUsPerNode)
				case cpuWorker:
					n.name, n.machine = fmt.Sprintf("cpu-worker-%d", i+1), server(16, 64)
				}
				return n
			}
			nodes := buildNodes(s, 1, node)
			// The second GPU pool of ExtraGPUNodes, named on from the first.
			for i := range s.ExtraGPUNodes {
				n := node(gpuWorker, s.GPUNodes+i)
				n.role, n.machine = gpuWorker, gpuServer(cmp.Or(s.ExtraGPUProduct, standin.GPUL4), s.GPUsPerNode)
				nodes = append(nodes, simNode(s, n))
			}
			return nodes
		},
		CRDs: func() []apiextensionsv1.CustomResourceDefinition { return nil },
		Objects: func(s Scenario) []unstructured.Unstructured {
			s = s.Defaults()
			return kubeadmConfigMaps(kubeadmCluster{
				kubernetesVersion: s.KubeletVersion,
				kubeMinor:         s.kubeMinor(),
				endpoint:          "10.10.0.10:6443",
				podSubnet:         "10.244.0.0/16",
				imageRepository:   "registry.k8s.io",
			})
		},
	}
}

// kubeadmCluster is what kubeadm's ClusterConfiguration records about a cluster.
type kubeadmCluster struct {
	kubernetesVersion string
	kubeMinor         int
	endpoint          string // controlPlaneEndpoint
	podSubnet         string
	imageRepository   string
}

// kubeadmConfigMaps are the ConfigMaps kubeadm init uploads to kube-system: kubeadm-config (the
// ClusterConfiguration) and kubelet-config (the KubeletConfiguration every node joins with).
func kubeadmConfigMaps(c kubeadmCluster) []unstructured.Unstructured {
	apiVersion := "kubeadm.k8s.io/v1beta4" // since kubeadm v1.31
	if c.kubeMinor < 31 {
		apiVersion = "kubeadm.k8s.io/v1beta3"
	}
	clusterConfiguration := fmt.Sprintf(`apiServer: {}
apiVersion: %s
certificatesDir: /etc/kubernetes/pki
clusterName: kubernetes
controlPlaneEndpoint: %s
controllerManager: {}
dns: {}
etcd:
  local:
    dataDir: /var/lib/etcd
imageRepository: %s
kind: ClusterConfiguration
kubernetesVersion: %s
networking:
  dnsDomain: cluster.local
  podSubnet: %s
  serviceSubnet: 10.96.0.0/12
proxy: {}
scheduler: {}
`, apiVersion, c.endpoint, c.imageRepository, c.kubernetesVersion, c.podSubnet)
	kubeletConfiguration := `apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: unix:///var/run/containerd/containerd.sock
kind: KubeletConfiguration
rotateCertificates: true
staticPodPath: /etc/kubernetes/manifests
`
	return []unstructured.Unstructured{
		configMapObject("kube-system", "kubeadm-config", map[string]string{"ClusterConfiguration": clusterConfiguration}),
		configMapObject("kube-system", "kubelet-config", map[string]string{"kubelet": kubeletConfiguration}),
	}
}
