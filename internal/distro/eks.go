package distro

import "strings"

// EKS is Amazon Elastic Kubernetes Service's name.
const EKS = "eks"

// eks: EKS node-group labels, "-eks-" builds, Karpenter's AWS labels, aws:/// providerIDs, Amazon
// Linux and Bottlerocket images (replicatedhq/troubleshoot pkg/analyze/distribution.go). Its profile
// turns the toolkit off: the GPU AMIs ship it.
func eks() Distribution {
	return Distribution{
		Name: EKS, Title: "Amazon Elastic Kubernetes Service", Short: "EKS", Profile: EKS,
		Signals: []Signal{
			{In: Label, Prefixes: []string{"eks.amazonaws.com/"}, Weight: 70},
			{In: Version, Match: Match{Contains: []string{"-eks-"}}, Weight: 70, GivesVersion: true},
			// Karpenter's AWS provider labels (karpenter.k8s.aws/instance-family, …) come with Karpenter on EKS, the
			// only Kubernetes it supports (bottlerocket-os/bottlerocket#4087, aws/amazon-vpc-cni-k8s#3104).
			{In: Label, Prefixes: []string{"karpenter.k8s.aws/"}, Weight: 60},
			{In: OSImage, Match: Match{Contains: []string{"Amazon Linux"}}, Weight: 20},
			// Bottlerocket's osImage names its variant, e.g. "Bottlerocket OS 1.44.0 (aws-k8s-1.33)";
			// the aws-k8s-* variants are built to join EKS (there are VMware and metal variants too).
			{In: OSImage, Match: Match{Prefix: "Bottlerocket", Contains: []string{"(aws-k8s-"}}, Weight: 60},
			// Amazon Linux kernels (".amzn2.x86_64", ".amzn2023.x86_64") and EC2 host names say AWS, not EKS: kOps,
			// OpenShift and RKE2 run there too (NVIDIA/gpu-operator#331, rancher/rke2#1395).
			{In: Kernel, Match: Match{Contains: []string{".amzn"}}, Weight: 20},
			{In: NodeName, Match: Match{Is: isEC2NodeName}, Weight: 20},
			{In: ProviderID, Match: Match{Prefix: "aws:///"}, Weight: 30},
			{In: ManagedControlPlane, Weight: 10},
		},
		PoolNotes: []PoolNote{{
			OS:   "amzn",
			Note: "EKS Amazon Linux GPU AMIs ship the driver and toolkit; NVIDIA supports only the device plugin there, or Ubuntu EKS AMIs for the full operator (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/amazon-eks.html)",
		}},
	}
}

// isEC2NodeName matches EC2's private DNS names, ip-10-0-114-53.ec2.internal (us-east-1) and
// ip-192-168-52-231.us-west-2.compute.internal (elsewhere). They say AWS, not which Kubernetes.
func isEC2NodeName(name string) bool {
	host, domain, ok := strings.Cut(name, ".")
	if !ok || !(domain == "ec2.internal" || strings.HasSuffix(domain, ".compute.internal")) {
		return false
	}
	octets := strings.Split(strings.TrimPrefix(host, "ip-"), "-")
	if !strings.HasPrefix(host, "ip-") || len(octets) != 4 {
		return false
	}
	for _, o := range octets {
		if o == "" || len(o) > 3 || !isOf(o, digits) {
			return false
		}
	}
	return true
}
