package detect

import (
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Matchers for the parts of a node that are not labels: its name, kernel and the like. Each returns the value
// it saw (for the evidence) and whether it matched.

func nodeNameMatches(match func(string) bool) func(*corev1.Node) (string, bool) {
	return func(n *corev1.Node) (string, bool) {
		return n.Name, match(n.Name)
	}
}

func kernelMatches(match func(string) bool) func(*corev1.Node) (string, bool) {
	return func(n *corev1.Node) (string, bool) {
		k := n.Status.NodeInfo.KernelVersion
		return k, k != "" && match(k)
	}
}

// labelPrefixExcept matches nodes with a label starting with prefix other than the keys listed (those are scored
// on their own), reporting the first (sorted).
func labelPrefixExcept(prefix string, except ...string) func(*corev1.Node) (string, bool) {
	return func(n *corev1.Node) (string, bool) {
		var keys []string
		for k := range n.Labels {
			if strings.HasPrefix(k, prefix) && !slices.Contains(except, k) {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			return "", false
		}
		sort.Strings(keys)
		return keys[0] + "=" + n.Labels[keys[0]], true
	}
}

// isGKENodeName matches GKE's VM names, gke-<cluster>-<pool>-<8 hex>-<4 characters>, cluster and pool names
// shortened to fit (gke-my-gpu-cluster-default-pool-4d0fa82d-ttxh, kubernetes/kubernetes#55005;
// gke-dev-pangeo-io-cl-jupyter-gpu-pool-026fa47a-q754, pangeo-data/pangeo-cloud-federation#425).
func isGKENodeName(name string) bool {
	parts := strings.Split(name, "-")
	if len(parts) < 5 || parts[0] != "gke" {
		return false
	}
	group, suffix := parts[len(parts)-2], parts[len(parts)-1]
	return len(group) == 8 && isOf(group, "0123456789abcdef") && len(suffix) == 4 && isOf(suffix, lowerAlnum)
}

// isAKSNodeName matches AKS's VM names: aks-<pool>-<8 digits>-vmss<6 base-36 characters> for scale sets
// (aks-newpool-20956280-vmss000000, virtual-kubelet/virtual-kubelet#1250) and aks-<pool>-<8 digits>-<n> for the
// older availability sets (aks-agentpool-33865844-0, kubernetes/autoscaler#1270).
func isAKSNodeName(name string) bool {
	parts := strings.Split(name, "-")
	if len(parts) != 4 || parts[0] != "aks" || parts[1] == "" || !isOf(parts[1], lowerAlnum) {
		return false
	}
	if len(parts[2]) != 8 || !isOf(parts[2], digits) {
		return false
	}
	last := parts[3]
	if rest, ok := strings.CutPrefix(last, "vmss"); ok {
		return len(rest) == 6 && isOf(rest, lowerAlnum)
	}
	return last != "" && isOf(last, digits)
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

const (
	digits     = "0123456789"
	lowerAlnum = "0123456789abcdefghijklmnopqrstuvwxyz"
)

// isOf reports whether s is made only of the characters in set.
func isOf(s, set string) bool {
	for _, r := range s {
		if !strings.ContainsRune(set, r) {
			return false
		}
	}
	return true
}
