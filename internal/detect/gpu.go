package detect

import (
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

const (
	// gpuResource is the extended resource NVIDIA's device plugin (and GKE's) advertises.
	gpuResource corev1.ResourceName = "nvidia.com/gpu"
	// nfdLabelPrefix starts every label NFD publishes.
	nfdLabelPrefix = "feature.node.kubernetes.io/"
	// nvidiaPCIVendor is NVIDIA's PCI vendor ID.
	nvidiaPCIVendor = "10de"
)

// gpuReasons lists why a node counts as an NVIDIA GPU node, strongest first: the labels NFD, GPU feature discovery
// and the clouds set, then the cloud's GPU instance families. No reason means it does not count.
func gpuReasons(n *corev1.Node) []Evidence {
	var out []Evidence

	// 1. A device plugin already advertises GPUs (GKE's own, or a previous install).
	if q, ok := n.Status.Capacity[gpuResource]; ok && q.Value() > 0 {
		out = append(out, Evidence{Signal: "capacity", Value: string(gpuResource) + "=" + q.String(), Source: "a device plugin"})
	}

	// 2. Labels left by NFD or an earlier GPU operator install.
	if n.Labels["nvidia.com/gpu.present"] == "true" {
		out = append(out, Evidence{Signal: "label", Value: "nvidia.com/gpu.present=true", Source: "GPU operator"})
	}
	out = append(out, nvidiaPCILabels(n.Labels)...)
	if p := n.Labels["nvidia.com/gpu.product"]; p != "" {
		out = append(out, Evidence{Signal: "label", Value: "nvidia.com/gpu.product=" + p, Source: "GPU feature discovery"})
	} else if kv, ok := gfdLabel(n.Labels); ok {
		out = append(out, Evidence{Signal: "label", Value: kv, Source: "GPU feature discovery"})
	}

	// 3. Labels the cloud puts on GPU nodes.
	if acc, ok := n.Labels["cloud.google.com/gke-accelerator"]; ok {
		out = append(out, Evidence{Signal: "label", Value: "cloud.google.com/gke-accelerator=" + acc, Source: "GKE"})
	}
	if n.Labels["kubernetes.azure.com/accelerator"] == "nvidia" {
		out = append(out, Evidence{Signal: "label", Value: "kubernetes.azure.com/accelerator=nvidia", Source: "AKS"})
	}
	if n.Labels["karpenter.k8s.aws/instance-gpu-manufacturer"] == "nvidia" {
		out = append(out, Evidence{Signal: "label", Value: "karpenter.k8s.aws/instance-gpu-manufacturer=nvidia", Source: "Karpenter"})
	}

	// 4. The instance type is an NVIDIA GPU type.
	if it := instanceType(n); it != "" {
		if src := gpuInstanceType(it); src != "" {
			out = append(out, Evidence{Signal: "instance type", Value: it, Source: src})
		}
	}
	return out
}

// gfdLabel finds a label GPU feature discovery publishes only about a GPU it found: the GPU's count, memory,
// family or compute capability, or the CUDA driver and runtime versions (nvidia.com/cuda.driver.major=515 on a
// MicroK8s node, canonical/microk8s-core-addons#114). The GPU operator's own settings (nvidia.com/gpu.deploy.*,
// nvidia.com/gpu.workload.config, …) can be put on any node, so they do not count.
func gfdLabel(labels map[string]string) (string, bool) {
	var keys []string
	for k, v := range labels {
		switch {
		case k == "nvidia.com/gpu.count":
			if c, err := strconv.Atoi(v); err == nil && c > 0 {
				keys = append(keys, k)
			}
		case k == "nvidia.com/gpu.memory", k == "nvidia.com/gpu.family", k == "nvidia.com/gpu.compute.major",
			strings.HasPrefix(k, "nvidia.com/cuda.driver"), strings.HasPrefix(k, "nvidia.com/cuda.runtime"):
			if v != "" {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		return "", false
	}
	sort.Strings(keys)
	return keys[0] + "=" + labels[keys[0]], true
}

// nvidiaPCILabels finds NFD's PCI labels for NVIDIA display controllers. The GPU operator's NFD
// values label pci-10de (deviceLabelFields [vendor]); upstream NFD defaults label pci-0300_10de or
// pci-0302_10de ([class, vendor]); the operator accepts all three (NVIDIA/gpu-operator
// controllers/state_manager.go@v26.7.0). Labels that also carry
// the device ID (pci-10de_20b0, pci-0302_10de_20b0) are accepted too. Other NVIDIA PCI classes are not GPUs — an
// NVSwitch is class 0680 — so only class 03xx counts.
func nvidiaPCILabels(labels map[string]string) []Evidence {
	var out []Evidence
	for k, val := range labels {
		if val != "true" || !strings.HasPrefix(k, nfdLabelPrefix+"pci-") || !strings.HasSuffix(k, ".present") {
			continue
		}
		fields := strings.Split(strings.TrimSuffix(strings.TrimPrefix(k, nfdLabelPrefix+"pci-"), ".present"), "_")
		gpu := fields[0] == nvidiaPCIVendor ||
			(len(fields) >= 2 && len(fields[0]) == 4 && strings.HasPrefix(fields[0], "03") && fields[1] == nvidiaPCIVendor)
		if gpu {
			out = append(out, Evidence{Signal: "label", Value: k + "=true", Source: "NFD"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Value < out[j].Value })
	return out
}

func instanceType(n *corev1.Node) string {
	if it := n.Labels["node.kubernetes.io/instance-type"]; it != "" {
		return it
	}
	return n.Labels["beta.kubernetes.io/instance-type"]
}

// gpuInstanceType says which cloud's NVIDIA GPU instance family it is, or "" (the
// instance families each cloud lists as NVIDIA GPU machines): AWS p2/p3/p4/p5/p6/g3/g3s/g4dn/g5/g5g/g6/g6e/gr6
// (g4ad is AMD), GCE a2/a3/a4/g2, Azure Standard_NC/ND/NV (NVv4, "…as_v4", is AMD Radeon, as is the ND MI300X
// series).
func gpuInstanceType(it string) string {
	if family, _, ok := strings.Cut(it, "."); ok {
		switch {
		case len(family) >= 2 && family[0] == 'p' && family[1] >= '2' && family[1] <= '6':
			return "AWS GPU instance type"
		case family == "g3" || family == "g3s" || family == "g4dn" || family == "g5" || family == "g5g" ||
			family == "g6" || family == "g6e" || family == "gr6":
			return "AWS GPU instance type"
		}
		return ""
	}
	if family, _, ok := strings.Cut(it, "-"); ok {
		switch family {
		case "a2", "a3", "a4", "a4x", "g2":
			return "GCE GPU machine type"
		}
		return ""
	}
	lower := strings.ToLower(it)
	if strings.HasPrefix(lower, "standard_nc") || strings.HasPrefix(lower, "standard_nd") || strings.HasPrefix(lower, "standard_nv") {
		if strings.HasSuffix(lower, "as_v4") || strings.Contains(lower, "mi300") {
			return ""
		}
		return "Azure GPU VM size"
	}
	return ""
}

// gpuCount is the node's GPU count where something states it: capacity, GFD's label, Karpenter's.
func gpuCount(n *corev1.Node) int {
	if q, ok := n.Status.Capacity[gpuResource]; ok && q.Value() > 0 {
		return int(q.Value())
	}
	for _, k := range []string{"nvidia.com/gpu.count", "karpenter.k8s.aws/instance-gpu-count"} {
		if c, err := strconv.Atoi(n.Labels[k]); err == nil && c > 0 {
			return c
		}
	}
	return 0
}

// gpuProduct is the GPU model where a label names it: GFD, GKE, Karpenter.
func gpuProduct(n *corev1.Node) string {
	for _, k := range []string{"nvidia.com/gpu.product", "cloud.google.com/gke-accelerator", "karpenter.k8s.aws/instance-gpu-name"} {
		if p := n.Labels[k]; p != "" {
			return p
		}
	}
	return ""
}

// hostDriver says why a GPU node is believed to have the NVIDIA driver installed on the host.
func hostDriver(n *corev1.Node) string {
	if n.Labels["nvidia.com/gpu.deploy.driver"] == "pre-installed" {
		// Set by the GPU operator's k8s-driver-manager when it finds a host driver (NVIDIA/gpu-operator
		// controllers/state_manager.go@v26.7.0).
		return "label nvidia.com/gpu.deploy.driver=pre-installed (the GPU operator found a host driver)"
	}
	if v, ok := n.Labels["cloud.google.com/gke-gpu-driver-version"]; ok {
		// GKE installs the driver itself when this label is set
		// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html).
		return "GKE installs the driver (cloud.google.com/gke-gpu-driver-version=" + v + ")"
	}
	return ""
}

func hasGPUTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == string(gpuResource) {
			return true
		}
	}
	return false
}
