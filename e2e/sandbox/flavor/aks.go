package flavor

import (
	"fmt"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// aksFlavor is an Azure Kubernetes Service cluster with a system node pool of CPU VMs and a user node
// pool of A100 VMs, on the AKS Ubuntu 22.04 node image with Azure CNI Overlay. Facts from
// https://learn.microsoft.com/azure/aks/nvidia-gpu-operator and replicatedhq/troubleshoot pkg/analyze/distribution.go: no control-plane nodes, plain kubelet version, kubernetes.azure.com/* labels
// (accelerator=nvidia on GPU pools), azure:///subscriptions/… provider IDs, and VM scale set node
// names aks-<pool>-<number>-vmss<instance>.
func aksFlavor() Flavor {
	const (
		region        = "eastus"
		nodeGroup     = "MC_rg-gpuctl_gpuctl-sandbox_eastus" // the managed node resource group
		nodeImage     = "AKSUbuntu-2204gen2containerd-202509.23.0"
		subscription  = "6f0c2b4e-9d3a-4c7e-8b21-5a9e3f1d7c40"
		poolGPU       = "gpupool"
		poolSystem    = "nodepool1"
		azureMaxPods  = 250 // Azure CNI Overlay's default
		diskGiB       = 128
		gpuPoolVMSize = "Standard_NC24ads_A100_v4"
	)
	gpuShapes := []machine{
		{instanceType: gpuPoolVMSize, cpu: 24, memoryGiB: 220, diskGiB: diskGiB, pods: azureMaxPods, gpus: 1, gpu: standin.GPUA100PCIe80},
		{instanceType: "Standard_NC48ads_A100_v4", cpu: 48, memoryGiB: 440, diskGiB: diskGiB, pods: azureMaxPods, gpus: 2, gpu: standin.GPUA100PCIe80},
		{instanceType: "Standard_NC96ads_A100_v4", cpu: 96, memoryGiB: 880, diskGiB: diskGiB, pods: azureMaxPods, gpus: 4, gpu: standin.GPUA100PCIe80},
		{instanceType: "Standard_ND96asr_v4", cpu: 96, memoryGiB: 900, diskGiB: diskGiB, pods: azureMaxPods, gpus: 8, gpu: standin.GPUA100SXM40},
	}
	ubuntu2204 := ubuntu("22.04.5", "5.15.0-1092-azure")
	return Flavor{
		Name:        "aks",
		Description: "Azure Kubernetes Service on the AKS Ubuntu 22.04 node image",
		// AKS's admission controllers include ExtendedResourceToleration (https://learn.microsoft.com/azure/aks/faq,
		// "What Kubernetes admission controllers does AKS support?").
		AdmissionPlugins: []string{"ExtendedResourceToleration"},
		Nodes: func(s Scenario) []SimNode {
			s = s.Defaults()
			vmssNumber := token("aks/gpuctl-sandbox", 8, "0123456789") // the same for every pool of a cluster
			return buildNodes(s, 0, func(r role, i int) nodeSpec {
				pool, mode := poolSystem, "system"
				m := machine{instanceType: "Standard_D4s_v5", cpu: 4, memoryGiB: 16, diskGiB: diskGiB, pods: azureMaxPods}
				if r == gpuWorker {
					pool, mode, m = poolGPU, "user", pickShape(gpuShapes, s.GPUsPerNode)
				}
				vmss := fmt.Sprintf("aks-%s-%s-vmss", pool, vmssNumber)
				instance := strconv.FormatInt(int64(i), 36) // VMSS instance IDs: six base-36 digits
				name := vmss + strings.Repeat("0", max(0, 6-len(instance))) + instance
				zone := fmt.Sprintf("%s-%d", region, i%3+1)
				labels := map[string]string{
					"agentpool":                                       pool,
					"kubernetes.azure.com/agentpool":                  pool,
					"kubernetes.azure.com/cluster":                    nodeGroup,
					"kubernetes.azure.com/mode":                       mode,
					"kubernetes.azure.com/role":                       "agent",
					"kubernetes.azure.com/node-image-version":         nodeImage,
					"kubernetes.azure.com/os-sku":                     "Ubuntu",
					"kubernetes.azure.com/storageprofile":             "managed",
					"kubernetes.azure.com/storagetier":                "Premium_LRS",
					"kubernetes.azure.com/azure-cni-overlay":          "true",
					"kubernetes.azure.com/kubelet-identity-client-id": uuidToken("aks/kubelet-identity"),
					"topology.disk.csi.azure.com/zone":                zone,
				}
				if r == gpuWorker {
					labels["kubernetes.azure.com/accelerator"] = "nvidia"
				}
				return nodeSpec{
					name:    name,
					machine: m,
					os:      ubuntu2204,
					runtime: "containerd://1.7.28-1",
					kubelet: s.KubeletVersion,
					providerID: fmt.Sprintf("azure:///subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/%s/virtualMachines/%d",
						subscription, strings.ToLower(nodeGroup), vmss, i),
					region: region,
					zone:   zone,
					labels: labels,
					annotations: map[string]string{
						"csi.volume.kubernetes.io/nodeid": jsonString(map[string]string{"disk.csi.azure.com": name, "file.csi.azure.com": name}),
					},
					// AKS (Kubernetes 1.29+) reserves 20 MB per pod plus 50 MB of memory, and the tiered CPU share.
					reserved: reserved{cpuMilli: tieredCPUReserved(m.cpu), memoryMiB: 20*m.pods + 50},
				}
			})
		},
		CRDs: func() []apiextensionsv1.CustomResourceDefinition {
			// The managed Azure Disk CSI driver installs the snapshot API.
			return newCRDs(snapshotCRDs()...)
		},
		Objects: func(Scenario) []unstructured.Unstructured { return nil },
	}
}
