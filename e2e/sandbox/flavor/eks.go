package flavor

import (
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// awsGPUShapes are EC2 GPU instance types, smallest first: vCPUs, memory and GPUs from the EC2
// instance type pages; max pods from the VPC CNI's ENI formula (eni-max-pods.txt).
func awsGPUShapes() []machine {
	return []machine{
		{instanceType: "g5.xlarge", cpu: 4, memoryGiB: 16, diskGiB: 100, pods: 58, gpus: 1, gpu: standin.GPUA10G},
		{instanceType: "g5.12xlarge", cpu: 48, memoryGiB: 192, diskGiB: 100, pods: 234, gpus: 4, gpu: standin.GPUA10G},
		{instanceType: "p4d.24xlarge", cpu: 96, memoryGiB: 1152, diskGiB: 200, pods: 737, gpus: 8, gpu: standin.GPUA100SXM40},
	}
}

// eksFlavor is an Amazon EKS cluster with two managed node groups on the EKS-optimized Amazon Linux
// 2023 AMIs (the NVIDIA variant for GPUs, which ships the driver and toolkit: https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/amazon-eks.html).
// Facts from replicatedhq/troubleshoot pkg/analyze/distribution.go and node dumps in NVIDIA/gpu-operator issues: no control-plane nodes, kubelet "-eks-<hash>",
// eks.amazonaws.com/* node-group labels, aws:///<zone>/<instance> provider IDs, osImage Amazon Linux
// 2023, and ip-….ec2.internal node names (us-east-1). Amazon Linux is ID amzn, VERSION_ID 2023.
func eksFlavor() Flavor {
	const region = "us-east-1"
	al2023 := osRelease{
		image:     "Amazon Linux 2023.8.20250915",
		kernel:    "6.12.46-66.121.amzn2023.x86_64",
		id:        "amzn",
		versionID: "2023",
	}
	return Flavor{
		Name:        "eks",
		Description: "Amazon EKS with managed node groups on Amazon Linux 2023",
		// Every EKS platform version enables ExtendedResourceToleration
		// (https://docs.aws.amazon.com/eks/latest/userguide/platform-versions.html).
		AdmissionPlugins: []string{"NodeRestriction", "ExtendedResourceToleration"},
		Nodes: func(s Scenario) []SimNode {
			s = s.Defaults()
			kubelet := s.KubeletVersion + "-eks-" + hexToken("eks/"+s.KubeletVersion, 7)
			clusterHash := hexToken("eks/gpuctl-sandbox", 32)
			return buildNodes(s, 0, func(r role, i int) nodeSpec {
				group, subnet, m := "cpu-nodes", "10.0.64.0", machine{instanceType: "m5.xlarge", cpu: 4, memoryGiB: 16, diskGiB: 80, pods: 58}
				if r == gpuWorker {
					group, subnet, m = "gpu-nodes", "10.0.32.0", pickShape(awsGPUShapes(), s.GPUsPerNode)
				}
				ip := ipv4(subnet, 20+37*i)
				zoneLetter, zoneID := "a", "use1-az1"
				if i%2 == 1 {
					zoneLetter, zoneID = "b", "use1-az2"
				}
				zone := region + zoneLetter
				name := "ip-" + strings.ReplaceAll(ip, ".", "-") + ".ec2.internal"
				return nodeSpec{
					name:       name,
					machine:    m,
					os:         al2023,
					runtime:    "containerd://2.1.4",
					kubelet:    kubelet,
					providerID: fmt.Sprintf("aws:///%s/i-0%s", zone, hexToken(name+"/instance", 16)),
					systemUUID: ec2UUID(name),
					region:     region,
					zone:       zone,
					labels: map[string]string{
						"eks.amazonaws.com/nodegroup":       group,
						"eks.amazonaws.com/nodegroup-image": "ami-0" + hexToken("eks/ami/"+group, 16),
						"eks.amazonaws.com/capacityType":    "ON_DEMAND",
						"k8s.io/cloud-provider-aws":         clusterHash,
						"topology.k8s.aws/zone-id":          zoneID,
					},
					annotations: map[string]string{"alpha.kubernetes.io/provided-node-ip": ip},
					// EKS AMIs reserve 255Mi + 11Mi per pod of memory, and the tiered CPU share.
					reserved: reserved{cpuMilli: tieredCPUReserved(m.cpu), memoryMiB: 255 + 11*m.pods},
				}
			})
		},
		CRDs: func() []apiextensionsv1.CustomResourceDefinition {
			// The Amazon VPC CNI and its network-policy agent.
			return newCRDs(
				crdSpec{"crd.k8s.amazonaws.com", "v1alpha1", "ENIConfig", "eniconfigs", true},
				crdSpec{"vpcresources.k8s.aws", "v1beta1", "SecurityGroupPolicy", "securitygrouppolicies", false},
				crdSpec{"vpcresources.k8s.aws", "v1alpha1", "CNINode", "cninodes", true},
				crdSpec{"networking.k8s.aws", "v1alpha1", "PolicyEndpoint", "policyendpoints", false},
			)
		},
		Objects: func(Scenario) []unstructured.Unstructured { return nil },
	}
}
