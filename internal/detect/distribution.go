package detect

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Distribution names. They are the names profile.ForDistribution maps to values profiles.
const (
	OpenShift = "openshift"
	GKE       = "gke"
	EKS       = "eks"
	AKS       = "aks"
	TKGS      = "tkgs"
	RKE2      = "rke2"
	K3s       = "k3s"
	MicroK8s  = "microk8s"
	K0s       = "k0s"
	Kubeadm   = "kubeadm"
)

// MinConfidence is what a distribution-specific detector must reach to be chosen over the kubeadm
// fallback. A cloud providerID alone (30) is not enough: kubeadm, RKE2 or OpenShift on a cloud VM
// carry the same providerID as the cloud's managed Kubernetes.
const MinConfidence = 50

// detector scores one distribution. detect returns the evidence found and the distribution's
// version where the evidence yields one.
type detector struct {
	name, description string
	detect            func(v *view) (ev []Evidence, version string)
}

// detectors lists one detector per distribution (OpenShift → GKE → EKS → AKS → Tanzu → RKE2 → k3s →
// MicroK8s → k0s → kubeadm; signals as in replicatedhq/troubleshoot pkg/analyze/distribution.go); the
// order also breaks ties.
//
// Weights, roughly: 70–90 for a signal only that distribution produces (its API group, its node
// labels or annotations, its version stamp); 30–60 for signals it shares with a few others
// (providerID prefixes, OS images, the k3s containerd fork, Rancher API groups); 10–20 for weak
// hints.
func detectors() []detector {
	return []detector{
		{OpenShift, "Red Hat OpenShift", detectOpenShift},
		{GKE, "Google Kubernetes Engine", detectGKE},
		{EKS, "Amazon Elastic Kubernetes Service", detectEKS},
		{AKS, "Azure Kubernetes Service", detectAKS},
		{TKGS, "VMware Tanzu Kubernetes Grid Service (vSphere Kubernetes Service)", detectTKGS},
		{RKE2, "Rancher RKE2", detectRKE2},
		{K3s, "K3s", detectK3s},
		{MicroK8s, "Canonical MicroK8s", detectMicroK8s},
		{K0s, "k0s", detectK0s},
		{Kubeadm, "Kubernetes, kubeadm or compatible", detectKubeadm},
	}
}

func chooseDistribution(v *view) (candidates []Candidate, best Candidate) {
	order := map[string]int{}
	var fallback Candidate
	for i, d := range detectors() {
		order[d.name] = i
		ev, version := d.detect(v)
		if version == "" {
			version = v.serverVersion
		}
		c := Candidate{Name: d.name, Description: d.description, Version: version, Confidence: confidence(ev), Evidence: ev}
		if d.name == Kubeadm {
			fallback = c
		}
		if c.Confidence > 0 {
			candidates = append(candidates, c)
		}
	}
	sort.SliceStable(candidates, func(i, j int) bool {
		if candidates[i].Confidence != candidates[j].Confidence {
			return candidates[i].Confidence > candidates[j].Confidence
		}
		return order[candidates[i].Name] < order[candidates[j].Name]
	})
	for i, c := range candidates {
		if c.Name != Kubeadm && c.Confidence >= MinConfidence {
			candidates[i].Evidence = append(candidates[i].Evidence, conflicts(c, candidates)...)
			return candidates, candidates[i]
		}
	}
	// kubeadm is the fallback: upstream defaults (containerd in its standard places) are the right
	// starting point for any cluster we cannot name. Fallback marks a guess, not a kubeadm cluster.
	if fallback.Confidence < MinConfidence {
		fallback.Fallback = true
		fallback.Evidence = append(fallback.Evidence, Evidence{
			Signal: "fallback",
			Value: fmt.Sprintf("no distribution-specific detector reached the minimum confidence (%d): no platform-unique signal was seen, "+
				"so upstream (kubeadm) defaults are assumed; low confidence", MinConfidence),
			Source: "gpuctl",
		})
		if hints := weakHints(candidates); hints != "" {
			fallback.Evidence = append(fallback.Evidence, Evidence{Signal: "weak hints", Value: hints, Source: "gpuctl"})
		}
	}
	return candidates, fallback
}

// uniqueWeight is the weight from which a signal counts as unique to its distribution (see detectors).
const uniqueWeight = 60

// conflicts is evidence, of no weight, that another distribution's unique signals were seen too: a mixed or
// relabelled cluster, or nodes copied from elsewhere. kubeadm does not conflict: TKGS and many others are built
// with it.
func conflicts(best Candidate, candidates []Candidate) []Evidence {
	var out []Evidence
	for _, c := range candidates {
		if c.Name == best.Name || c.Name == Kubeadm {
			continue
		}
		for _, e := range c.Evidence {
			if e.Weight >= uniqueWeight {
				out = append(out, Evidence{
					Signal: "conflict",
					Value:  fmt.Sprintf("%s's own signals were seen too (confidence %d): %s %s", c.Name, c.Confidence, e.Signal, e.Value),
					Source: e.Source,
				})
				break
			}
		}
	}
	return out
}

// weakHints lists the candidates that found something but too little, strongest first.
func weakHints(candidates []Candidate) string {
	var parts []string
	for _, c := range candidates {
		if c.Name == Kubeadm || len(c.Evidence) == 0 {
			continue
		}
		e := c.Evidence[0]
		for _, x := range c.Evidence[1:] {
			if x.Weight > e.Weight {
				e = x
			}
		}
		parts = append(parts, fmt.Sprintf("%s %d (%s %s)", c.Name, c.Confidence, e.Signal, e.Value))
	}
	return strings.Join(parts, "; ")
}

// OpenShift: its API groups (config.openshift.io holds ClusterVersion, which the GPU operator
// reads), node label node.openshift.io/os_id, kubelet "+<git hash>" builds, CRI-O (replicatedhq/troubleshoot
// pkg/analyze/distribution.go).
func detectOpenShift(v *view) ([]Evidence, string) {
	var ev []Evidence
	ev = append(ev, v.apiGroup("config.openshift.io", 80)...)
	ev = append(ev, v.apiGroup("security.openshift.io", 40)...)
	ev = append(ev, v.apiGroup("apps.openshift.io", 30)...)
	ev = append(ev, v.onNodes("label", 60, labelKey("node.openshift.io/os_id"))...)
	// Only OpenShift builds its kubelet with a bare git hash after the "+" (v1.20.0+bd9e442); the other
	// distributions that stamp their builds put a name there (+k3s1, +rke2r1, +vmware.1, +k0s).
	suffix, _ := v.versionSuffix(60, hasGitHashSuffix)
	ev = append(ev, suffix...)
	// RHCOS is OpenShift's node OS and ships with it only ("Red Hat Enterprise Linux CoreOS 47.84…",
	// red-hat-storage/ocs-ci#3872); OpenShift's CRI-O builds carry "rhaos" (Red Hat OpenShift) in their version
	// ("cri-o://1.20.0-0.rhaos4.7.gitfdbdf43.el8.52", same source).
	ev = append(ev, v.onNodes("os image", 60, osImageContains("Red Hat Enterprise Linux CoreOS"))...)
	ev = append(ev, v.onNodes("container runtime", 60, runtimeMatches(func(rt string) bool {
		return strings.HasPrefix(rt, "cri-o://") && strings.Contains(rt, ".rhaos")
	}))...)
	ev = append(ev, v.onNodes("container runtime", 10, runtimeMatches(func(rt string) bool {
		return strings.HasPrefix(rt, "cri-o://") && !strings.Contains(rt, ".rhaos")
	}))...)

	version := ""
	if cv := v.s.ClusterVersion; cv != nil {
		switch {
		case len(cv.Completed) > 0:
			version = cv.Completed[0]
		case cv.Desired != "":
			version = cv.Desired
		}
		if version != "" {
			ev = append(ev, Evidence{Signal: "ClusterVersion", Value: version, Source: "ClusterVersion version", Weight: 90})
		}
	}
	return ev, version
}

// hasGitHashSuffix matches OpenShift's kubelet builds, "v1.23.5+70fb84c" (replicatedhq/troubleshoot
// pkg/analyze/distribution.go).
func hasGitHashSuffix(version string) bool {
	i := strings.LastIndex(version, "+")
	if i < 0 {
		return false
	}
	hash := version[i+1:]
	if len(hash) < 7 || len(hash) > 40 {
		return false
	}
	for _, r := range hash {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// GKE: node-pool and OS labels, "-gke." builds, gce:// providerIDs, Container-Optimized OS
// (replicatedhq/troubleshoot pkg/analyze/distribution.go).
func detectGKE(v *view) ([]Evidence, string) {
	var ev []Evidence
	ev = append(ev, v.onNodes("label", 70, labelKey("cloud.google.com/gke-nodepool"))...)
	ev = append(ev, v.onNodes("label", 40, labelKey("cloud.google.com/gke-os-distribution"))...)
	suffix, version := v.versionSuffix(70, func(s string) bool { return strings.Contains(s, "-gke.") })
	ev = append(ev, suffix...)
	ev = append(ev, v.onNodes("os image", 40, osImageContains("Container-Optimized OS"))...)
	ev = append(ev, v.onNodes("label", 60, labelKey(gkeAutopilotLabel))...)
	// Any other cloud.google.com/gke-* label (gke-accelerator, gke-boot-disk, …) is GKE's own.
	ev = append(ev, v.onNodes("label", 70, labelPrefixExcept("cloud.google.com/gke-",
		"cloud.google.com/gke-nodepool", "cloud.google.com/gke-os-distribution", gkeAutopilotLabel))...)
	ev = append(ev, v.onNodes("node name", 60, nodeNameMatches(isGKENodeName))...)
	// Ubuntu's linux-gke kernel flavour ("5.15.0-1048-gke") is built for GKE's Ubuntu node images.
	ev = append(ev, v.onNodes("kernel", 50, kernelMatches(func(k string) bool { return strings.HasSuffix(k, "-gke") }))...)
	ev = append(ev, v.onNodes("providerID", 30, providerIDPrefix("gce://"))...)
	ev = append(ev, managedControlPlane(v, ev)...)
	return ev, version
}

// EKS: EKS node-group labels, "-eks-" builds, Karpenter's AWS labels, aws:/// providerIDs, Amazon
// Linux and Bottlerocket images (replicatedhq/troubleshoot pkg/analyze/distribution.go).
func detectEKS(v *view) ([]Evidence, string) {
	var ev []Evidence
	ev = append(ev, v.onNodes("label", 70, labelPrefix("eks.amazonaws.com/"))...)
	suffix, version := v.versionSuffix(70, func(s string) bool { return strings.Contains(s, "-eks-") })
	ev = append(ev, suffix...)
	// Karpenter's AWS provider labels (karpenter.k8s.aws/instance-family, …) come with Karpenter on EKS, the
	// only Kubernetes it supports (bottlerocket-os/bottlerocket#4087, aws/amazon-vpc-cni-k8s#3104).
	ev = append(ev, v.onNodes("label", 60, labelPrefix("karpenter.k8s.aws/"))...)
	ev = append(ev, v.onNodes("os image", 20, osImageContains("Amazon Linux"))...)
	// Bottlerocket's osImage names its variant, e.g. "Bottlerocket OS 1.44.0 (aws-k8s-1.33)";
	// the aws-k8s-* variants are built to join EKS (there are VMware and metal variants too).
	ev = append(ev, v.onNodes("os image", 60, func(n *corev1.Node) (string, bool) {
		img := n.Status.NodeInfo.OSImage
		return img, strings.HasPrefix(img, "Bottlerocket") && strings.Contains(img, "(aws-k8s-")
	})...)
	// Amazon Linux kernels (".amzn2.x86_64", ".amzn2023.x86_64") and EC2 host names say AWS, not EKS: kOps,
	// OpenShift and RKE2 run there too (NVIDIA/gpu-operator#331, rancher/rke2#1395).
	ev = append(ev, v.onNodes("kernel", 20, kernelMatches(func(k string) bool { return strings.Contains(k, ".amzn") }))...)
	ev = append(ev, v.onNodes("node name", 20, nodeNameMatches(isEC2NodeName))...)
	ev = append(ev, v.onNodes("providerID", 30, providerIDPrefix("aws:///"))...)
	ev = append(ev, managedControlPlane(v, ev)...)
	return ev, version
}

// AKS: kubernetes.azure.com/* labels and azure:/// providerIDs (replicatedhq/troubleshoot pkg/analyze/distribution.go).
func detectAKS(v *view) ([]Evidence, string) {
	var ev []Evidence
	ev = append(ev, v.onNodes("label", 70, labelKey("kubernetes.azure.com/cluster"))...)
	ev = append(ev, v.onNodes("label", 50, labelKey("kubernetes.azure.com/agentpool"))...)
	// AKS's other labels (kubernetes.azure.com/role, node-image-version, mode, …; Azure/AKS#2766).
	ev = append(ev, v.onNodes("label", 60, labelPrefixExcept("kubernetes.azure.com/",
		"kubernetes.azure.com/cluster", "kubernetes.azure.com/agentpool"))...)
	// AKS names its VMs aks-<pool>-<8 digits>-vmss<6 base-36 digits> (scale sets) or -<n> (availability sets).
	ev = append(ev, v.onNodes("node name", 60, nodeNameMatches(isAKSNodeName))...)
	// The node resource group AKS creates is MC_<group>_<cluster>_<region>; a providerID in one is an AKS VM.
	ev = append(ev, v.onNodes("providerID", 70, func(n *corev1.Node) (string, bool) {
		id := n.Spec.ProviderID
		return id, strings.HasPrefix(id, "azure://") && strings.Contains(strings.ToLower(id), "/resourcegroups/mc_")
	})...)
	ev = append(ev, v.onNodes("providerID", 30, func(n *corev1.Node) (string, bool) {
		id := n.Spec.ProviderID
		return id, strings.HasPrefix(id, "azure://") && !strings.Contains(strings.ToLower(id), "/resourcegroups/mc_")
	})...)
	// AKS builds its own containerd, "containerd://1.4.4+azure" (Azure/azure-workload-identity#46). The retired
	// aks-engine shipped Microsoft's builds too, so this is the weakest of AKS's unique signals. Ubuntu's -azure
	// kernel ("5.4.0-1046-azure", same source) runs on any Ubuntu VM in Azure.
	ev = append(ev, v.onNodes("container runtime", 60, runtimeMatches(func(rt string) bool { return strings.Contains(rt, "+azure") }))...)
	ev = append(ev, v.onNodes("kernel", 20, kernelMatches(func(k string) bool { return strings.HasSuffix(k, "-azure") }))...)
	ev = append(ev, managedControlPlane(v, ev)...)
	return ev, ""
}

// managedControlPlane adds a weak hint for cloud-managed Kubernetes: no control-plane node is
// listed (replicatedhq/troubleshoot pkg/analyze/distribution.go). It only counts when the cloud's own signals
// were already seen, since it says nothing about which cloud.
func managedControlPlane(v *view, ev []Evidence) []Evidence {
	if len(ev) == 0 || len(v.s.Nodes) == 0 {
		return nil
	}
	for i := range v.s.Nodes {
		if IsControlPlane(&v.s.Nodes[i]) {
			return nil
		}
	}
	return []Evidence{{Signal: "control plane", Value: "not among the nodes, as with a managed control plane", Source: "node list", Weight: 10}}
}

// TKGS / VKS: the TKR label, "+vmware." builds, run.tanzu.vmware.com, the guest cluster's cloud
// provider, vsphere:// providerIDs (replicatedhq/troubleshoot pkg/analyze/distribution.go; a vSphere 7.0U3 guest cluster).
// TKGS clusters are built by Cluster API with kubeadm, so kubeadm scores too; TKGS wins because kubeadm is the
// fallback.
func detectTKGS(v *view) ([]Evidence, string) {
	var ev []Evidence
	tkr := v.onNodes("label", 80, labelKey("run.tanzu.vmware.com/kubernetesDistributionVersion"))
	ev = append(ev, tkr...)
	suffix, version := v.versionSuffix(60, func(s string) bool { return strings.Contains(s, "+vmware.") })
	ev = append(ev, suffix...)
	ev = append(ev, v.apiGroup("run.tanzu.vmware.com", 50)...)
	for _, w := range v.s.Workloads {
		if Classify(w) == ComponentTKGSCloudProvider {
			ev = append(ev, Evidence{Signal: "workload", Value: w.Kind + " " + w.Namespace + "/" + w.Name, Source: "Deployments", Weight: 50})
			break
		}
	}
	ev = append(ev, v.onNodes("providerID", 20, providerIDPrefix("vsphere://"))...)
	if len(tkr) > 0 {
		// The TKR name, e.g. v1.20.8_vmware.1-tkg.2, is the most precise version there is.
		version = strings.TrimPrefix(tkr[0].Value, "run.tanzu.vmware.com/kubernetesDistributionVersion=")
	}
	return ev, version
}

// RKE2 and k3s share the k3s containerd fork (runtime "containerd://…-k3s1", socket
// /run/k3s/containerd/containerd.sock) and the helm.cattle.io and k3s.cattle.io API groups
// (addons.k3s.cattle.io is served on RKE2 too: rancher/rke2#2425). What tells them apart is the
// program name in the node annotations, the version stamp and the embedded cloud provider's
// instance-type label (replicatedhq/troubleshoot pkg/analyze/distribution.go; RKE2 v1.24.9+rke2r2).
func detectRKE2(v *view) ([]Evidence, string) {
	return detectRancher(v, "rke2", "+rke2r")
}

func detectK3s(v *view) ([]Evidence, string) {
	return detectRancher(v, "k3s", "+k3s")
}

func detectRancher(v *view, program, versionMark string) ([]Evidence, string) {
	var ev []Evidence
	ev = append(ev, v.onNodes("annotation", 70, annotationPrefix(program+".io/", "etcd."+program+".cattle.io/"))...)
	ev = append(ev, v.onNodes("label", 70, labelPrefix(program+".io/"))...)
	suffix, version := v.versionSuffix(70, func(s string) bool {
		// k3s stamped its builds "-k3s.1" before it took "+k3s1" (v1.16.2-k3s.1, k3s-io/k3s#1032).
		return strings.Contains(s, versionMark) || (program == "k3s" && strings.Contains(s, "-k3s."))
	})
	ev = append(ev, suffix...)
	ev = append(ev, v.onNodes("label", 60, labelValue("node.kubernetes.io/instance-type", program))...)
	ev = append(ev, v.onNodes("container runtime", 40, runtimeMatches(func(rt string) bool {
		return strings.HasPrefix(rt, "containerd://") && strings.Contains(rt, "-k3s")
	}))...)
	ev = append(ev, v.apiGroup("helm.cattle.io", 30)...)
	ev = append(ev, v.apiGroup("k3s.cattle.io", 10)...)
	return ev, version
}

// MicroK8s: its node labels (replicatedhq/troubleshoot pkg/analyze/distribution.go).
func detectMicroK8s(v *view) ([]Evidence, string) {
	var ev []Evidence
	ev = append(ev, v.onNodes("label", 80, labelValue("microk8s.io/cluster", "true"))...)
	ev = append(ev, v.onNodes("label", 70, func(n *corev1.Node) (string, bool) {
		for _, k := range []string{"node.kubernetes.io/microk8s-controlplane", "node.kubernetes.io/microk8s-worker"} {
			if val, ok := n.Labels[k]; ok {
				return k + "=" + val, true
			}
		}
		return "", false
	})...)
	return ev, ""
}

// k0s: its role label, and its version stamp: "v1.33.2+k0s" today, "v1.20.2-k0s1" before
// (https://docs.k0sproject.io/stable/worker-node-config/, https://docs.k0sproject.io/v1.23.1+k0s.0/worker-node-config/).
func detectK0s(v *view) ([]Evidence, string) {
	var ev []Evidence
	ev = append(ev, v.onNodes("label", 80, labelKey("node.k0sproject.io/role"))...)
	suffix, version := v.versionSuffix(70, func(s string) bool { return strings.Contains(s, "+k0s") || strings.Contains(s, "-k0s") })
	ev = append(ev, suffix...)
	return ev, version
}

// kubeadm: ConfigMap kube-system/kubeadm-config, and kubeadm's empty-valued control-plane role
// label (RKE2 and k3s set "true") (replicatedhq/troubleshoot pkg/analyze/distribution.go).
func detectKubeadm(v *view) ([]Evidence, string) {
	var ev []Evidence
	if v.s.KubeadmConfig {
		ev = append(ev, Evidence{Signal: "ConfigMap", Value: "kube-system/kubeadm-config", Source: "kube-system", Weight: 80})
	}
	ev = append(ev, v.onNodes("label", 20, func(n *corev1.Node) (string, bool) {
		val, ok := n.Labels["node-role.kubernetes.io/control-plane"]
		return "node-role.kubernetes.io/control-plane=", ok && val == ""
	})...)
	// kubeadm annotates the nodes it joins with their CRI socket (kind, itself kubeadm, shows it:
	// projectcapsule/capsule-proxy#137). Cluster API clusters (TKGS among them) are kubeadm too.
	ev = append(ev, v.onNodes("annotation", 70, annotationPrefix("kubeadm.alpha.kubernetes.io/cri-socket"))...)
	return ev, ""
}

// gkeAutopilotLabel marks GKE Autopilot nodes (replicatedhq/troubleshoot pkg/analyze/distribution.go).
const gkeAutopilotLabel = "cloud.google.com/gke-autopilot"

// autopilot looks for GKE Autopilot: its node label (replicatedhq/troubleshoot pkg/analyze/distribution.go), "gk3-"
// node names (Autopilot's node naming; community convention, weaker), and Autopilot's policy refusals ("GKEAutopilot
// authz" in Forbidden errors, agones-dev/agones#2249).
func autopilot(v *view) *Finding {
	var ev []Evidence
	ev = append(ev, v.onNodes("label", 80, labelKey(gkeAutopilotLabel))...)
	ev = append(ev, v.onNodes("node name", 50, func(n *corev1.Node) (string, bool) {
		return n.Name, strings.HasPrefix(n.Name, "gk3-")
	})...)
	for _, w := range v.s.Warnings {
		if strings.Contains(w, "GKEAutopilot") || strings.Contains(w, "GKE Autopilot") {
			ev = append(ev, Evidence{Signal: "policy refusal", Value: w, Source: "API server", Weight: 50})
			break
		}
	}
	return &Finding{Detected: confidence(ev) >= MinConfidence, Evidence: ev}
}
