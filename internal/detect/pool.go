package detect

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuctl/gpuctl/internal/distro"
)

// poolLabels are the labels platforms use to name node pools, in the order they are tried:
// GKE, EKS managed node groups, Karpenter (current and pre-v1 names), AKS (replicatedhq/troubleshoot
// pkg/analyze/distribution.go).
func poolLabels() []string {
	return []string{
		"cloud.google.com/gke-nodepool",
		"eks.amazonaws.com/nodegroup",
		"karpenter.sh/nodepool",
		"karpenter.sh/provisioner-name",
		"kubernetes.azure.com/agentpool",
	}
}

// pools groups nodes into pools and builds the GPU node list, so each GPU node can name its pool. notes
// are the distribution's notes on GPU pools.
func pools(v *view, notes []distro.PoolNote, gpus map[string][]Evidence) ([]Pool, []GPUNode) {
	byKey := map[string]*Pool{}
	var keys []string
	memberOf := map[string]string{}
	names := map[string]string{} // inferred pool name → key, to keep names unique

	for i := range v.s.Nodes {
		n := &v.s.Nodes[i]
		_, gpu := gpus[n.Name]
		m := poolOf(n, gpu)
		p, ok := byKey[m.key]
		if !ok {
			name := m.name
			if m.label == "" {
				for suffix := 2; names[name] != "" && names[name] != m.key; suffix++ {
					name = m.name + "-" + strconv.Itoa(suffix)
				}
				names[name] = m.key
			}
			p = &Pool{Name: name, Label: m.label}
			byKey[m.key] = p
			keys = append(keys, m.key)
		}
		memberOf[n.Name] = p.Name
		addToPool(p, n, gpu)
	}

	var out []Pool
	for _, k := range keys {
		p := byKey[k]
		finishPool(p, v, notes)
		out = append(out, *p)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })

	var gpuNodes []GPUNode
	for i := range v.s.Nodes {
		n := &v.s.Nodes[i]
		reasons, ok := gpus[n.Name]
		if !ok {
			continue
		}
		gpuNodes = append(gpuNodes, gpuNodeOf(n, memberOf[n.Name], reasons))
	}
	sort.Slice(gpuNodes, func(i, j int) bool { return gpuNodes[i].Name < gpuNodes[j].Name })
	return out, gpuNodes
}

// gpuNodeOf is what detection says of a GPU node of pool, found for reasons.
func gpuNodeOf(n *corev1.Node, pool string, reasons []Evidence) GPUNode {
	return GPUNode{
		Name:          n.Name,
		Pool:          pool,
		Reasons:       reasons,
		GPUs:          gpuCount(n),
		Product:       gpuProduct(n),
		InstanceType:  instanceType(n),
		OSImage:       n.Status.NodeInfo.OSImage,
		Kernel:        n.Status.NodeInfo.KernelVersion,
		Runtime:       n.Status.NodeInfo.ContainerRuntimeVersion,
		ControlPlane:  IsControlPlane(n),
		Unschedulable: n.Spec.Unschedulable,
		Tainted:       hasGPUTaint(n),
		Taints:        slices.Clone(n.Spec.Taints),
		HostDriver:    hostDriver(n),
	}
}

type poolKey struct {
	key, name, label string
}

// poolOf names a node's pool: the platform's pool label if it has one, else a pool inferred from
// what makes nodes interchangeable for the GPU stack — role, GPU or not, instance type (else the GPU
// product), OS image and container runtime.
func poolOf(n *corev1.Node, gpu bool) poolKey {
	for _, l := range poolLabels() {
		if val := n.Labels[l]; val != "" {
			return poolKey{key: "label\x00" + l + "\x00" + val, name: val, label: l + "=" + val}
		}
	}
	role := "worker"
	if IsControlPlane(n) {
		role = "control-plane"
	}
	parts := []string{role}
	if gpu {
		parts = append(parts, "gpu")
	}
	it := instanceType(n)
	// Without an instance type (on-premises servers), GPU nodes of different GPU models are different
	// pools: the GPU product (GPU feature discovery's, or a cloud's accelerator label) tells them apart.
	product := ""
	if gpu && it == "" {
		product = gpuProduct(n)
	}
	switch {
	case it != "":
		parts = append(parts, it)
	case product != "":
		parts = append(parts, product)
	}
	info := n.Status.NodeInfo
	return poolKey{
		key:  strings.Join([]string{"inferred", role, strconv.FormatBool(gpu), it, product, info.OSImage, info.ContainerRuntimeVersion}, "\x00"),
		name: strings.Join(parts, "-"),
	}
}

func addToPool(p *Pool, n *corev1.Node, gpu bool) {
	info := n.Status.NodeInfo
	p.Nodes = append(p.Nodes, n.Name)
	p.Count++
	if gpu {
		p.GPUNodes++
	}
	if IsControlPlane(n) {
		p.ControlPlane = true
	}
	if p.InstanceType == "" {
		p.InstanceType = instanceType(n)
	}
	if p.OS == "" {
		p.OS = osFamily(n)
	}
	p.OSImages = addUnique(p.OSImages, info.OSImage)
	p.Kernels = addUnique(p.Kernels, info.KernelVersion)
	p.Runtimes = addUnique(p.Runtimes, info.ContainerRuntimeVersion)
	p.KubeletVersions = addUnique(p.KubeletVersions, info.KubeletVersion)
	for _, t := range n.Spec.Taints {
		p.Taints = addUnique(p.Taints, t.ToString())
	}
}

func addUnique(list []string, s string) []string {
	if s == "" {
		return list
	}
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// osFamily is a short OS name from NFD's os_release label, or else the osImage.
func osFamily(n *corev1.Node) string {
	if id := n.Labels[nfdLabelPrefix+"system-os_release.ID"]; id != "" {
		return id
	}
	img := n.Status.NodeInfo.OSImage
	for _, f := range []struct{ contains, family string }{
		{"Container-Optimized OS", "cos"},
		{"Red Hat Enterprise Linux CoreOS", "rhcos"},
		{"Red Hat Enterprise Linux", "rhel"},
		{"Ubuntu", "ubuntu"},
		{"Amazon Linux", "amzn"},
		{"Bottlerocket", "bottlerocket"},
		{"Flatcar", "flatcar"},
		{"CBL-Mariner", "azurelinux"},
		{"Azure Linux", "azurelinux"},
		{"Rocky Linux", "rocky"},
		{"SUSE", "sles"},
		{"Talos", "talos"},
		{"VMware Photon", "photon"},
		{"Debian", "debian"},
		{"CentOS", "centos"},
	} {
		if strings.Contains(img, f.contains) {
			return f.family
		}
	}
	return ""
}

// finishPool sorts the pool's lists and adds the notes that follow from documented facts: the node
// OS's, the distribution's (notes) and its containerd's.
func finishPool(p *Pool, v *view, notes []distro.PoolNote) {
	sort.Strings(p.Nodes)
	sort.Strings(p.Taints)
	if p.GPUNodes == 0 {
		return
	}
	nodes := poolNodes(v, p)

	// The NVIDIA driver container cannot build on these OSes (supported OSes:
	// https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/platform-support.html).
	switch p.OS {
	case "cos", "amzn", "bottlerocket", "flatcar":
		p.Notes = append(p.Notes, fmt.Sprintf("NVIDIA's driver container does not support %s; the driver must come from the host or the platform (driver.enabled=false)", p.OS))
	}
	for _, n := range notes {
		switch {
		case n.OS != "" && n.OS != p.OS:
		case n.Label == "" || anyLabel(nodes, n.Label, n.Value):
			p.Notes = append(p.Notes, n.Note)
		default:
			p.Notes = append(p.Notes, n.Otherwise)
		}
	}
	for _, rt := range p.Runtimes {
		if name, ver, ok := strings.Cut(rt, "://"); ok && name == "containerd" && olderThan(ver, 1, 7) {
			p.Notes = append(p.Notes, fmt.Sprintf("containerd %s is older than 1.7: CDI needs 1.7+, and GPU Operator v26.7.0 supports containerd 1.8–2.3 (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/platform-support.html)", ver))
		}
	}
}

func poolNodes(v *view, p *Pool) []*corev1.Node {
	in := map[string]bool{}
	for _, n := range p.Nodes {
		in[n] = true
	}
	var out []*corev1.Node
	for i := range v.s.Nodes {
		if in[v.s.Nodes[i].Name] {
			out = append(out, &v.s.Nodes[i])
		}
	}
	return out
}

func anyLabel(nodes []*corev1.Node, key, value string) bool {
	for _, n := range nodes {
		if n.Labels[key] == value {
			return true
		}
	}
	return false
}

// olderThan reports whether a "major.minor.patch[-suffix]" version is older than major.minor.
// Unparseable versions are not reported as old.
func olderThan(version string, major, minor int) bool {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	end := 0
	for end < len(parts[1]) && parts[1][end] >= '0' && parts[1][end] <= '9' {
		end++
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1][:end])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma < major || (ma == major && mi < minor)
}
