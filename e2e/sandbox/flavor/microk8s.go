package flavor

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// microk8sFlavor is a MicroK8s cluster on Ubuntu workstations: one node that runs the control plane,
// and GPU and CPU nodes joined with --worker. MicroK8s labels every node microk8s.io/cluster=true and
// marks control-plane and worker nodes with node.kubernetes.io/microk8s-controlplane and
// microk8s-worker (replicatedhq/troubleshoot pkg/analyze/distribution.go). It sets no node-role.kubernetes.io labels (kubectl
// shows ROLES <none>), taints nothing, and reports no provider ID or instance type.
func microk8sFlavor() Flavor {
	// A workstation on Ubuntu 22.04 with the HWE kernel.
	ubuntu2204 := ubuntu("22.04.5", "6.8.0-85-generic")
	return Flavor{
		Name:        "microk8s",
		Description: "MicroK8s snap on Ubuntu 22.04 workstations",
		Nodes: func(s Scenario) []SimNode {
			s = s.Defaults()
			return buildNodes(s, 1, func(r role, i int) nodeSpec {
				n := nodeSpec{
					os:      ubuntu2204,
					runtime: "containerd://1.7.27", // the snap's bundled containerd
					kubelet: s.KubeletVersion,
					labels: map[string]string{
						"microk8s.io/cluster":                "true",
						"node.kubernetes.io/microk8s-worker": "microk8s-worker",
					},
				}
				switch r {
				case controlPlane:
					n.name, n.machine = fmt.Sprintf("microk8s-%d", i+1), server(16, 64)
					n.labels = map[string]string{
						"microk8s.io/cluster":                      "true",
						"node.kubernetes.io/microk8s-controlplane": "microk8s-controlplane",
					}
				case gpuWorker:
					// Workstation GPUs: an RTX A6000 is a VGA-class (0300) device.
					n.name, n.machine = fmt.Sprintf("gpu-workstation-%d", i+1), gpuServer(standin.GPURTXA6000, s.GPUsPerNode)
				case cpuWorker:
					n.name, n.machine = fmt.Sprintf("workstation-%d", i+1), server(16, 64)
				}
				return n
			})
		},
		CRDs:    func() []apiextensionsv1.CustomResourceDefinition { return nil },
		Objects: func(Scenario) []unstructured.Unstructured { return nil },
	}
}
