package flavor

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin/nfd"
)

// This file holds the builders every flavour shares: they turn a flavour's facts (node names, machine
// shapes, OS images, labels) into Node objects, CRDs and unstructured objects. The facts themselves
// live in <distro>.go.

// role is what a node is for.
type role int

const (
	controlPlane role = iota
	gpuWorker
	cpuWorker
)

// machine is the shape of a VM or server: what the kubelet reports as capacity.
type machine struct {
	instanceType string // node.kubernetes.io/instance-type; "" where the platform sets none
	cpu          int64  // cores
	memoryGiB    int64
	diskGiB      int64  // root disk, which backs ephemeral-storage
	pods         int64  // the kubelet's max pods
	gpus         int    // GPUs the shape comes with (0 for CPU shapes)
	gpu          string // their product, one of the gpu… constants
}

// pickShape returns the smallest shape with at least n GPUs, or the largest if none has enough.
// Shapes are listed smallest first.
func pickShape(shapes []machine, n int) machine {
	for _, m := range shapes {
		if m.gpus >= n {
			return m
		}
	}
	return shapes[len(shapes)-1]
}

// gpuServer is an on-premises GPU server sized for n GPUs: 16 cores and 128 GiB per GPU.
func gpuServer(gpu string, n int) machine {
	n = max(1, min(n, 8))
	return machine{cpu: int64(16 * n), memoryGiB: int64(128 * n), diskGiB: 960, pods: 110, gpus: n, gpu: gpu}
}

// server is an on-premises machine without GPUs.
func server(cpu, memoryGiB int64) machine {
	return machine{cpu: cpu, memoryGiB: memoryGiB, diskGiB: 240, pods: 110}
}

// osRelease is a node's operating system as the kubelet (status.nodeInfo) and /etc/os-release show it.
type osRelease struct {
	image, kernel                string // nodeInfo.osImage and kernelVersion
	id, versionID, ostreeVersion string // os-release ID, VERSION_ID, OSTREE_VERSION
}

// ubuntu returns an Ubuntu LTS release ("22.04.5") running the given kernel.
func ubuntu(release, kernel string) osRelease {
	return osRelease{image: "Ubuntu " + release + " LTS", kernel: kernel, id: "ubuntu", versionID: release[:5]}
}

// reserved is what the platform keeps back from the kubelet's allocatable (kube- and
// system-reserved); the hard eviction thresholds come on top.
type reserved struct {
	cpuMilli, memoryMiB int64
}

// tieredCPUReserved is the CPU reservation GKE documents and EKS and AKS copy: 6% of the first core,
// 1% of the second, 0.5% of the next two and 0.25% of every core above four.
func tieredCPUReserved(cores int64) int64 {
	milli := int64(0)
	for c := int64(1); c <= cores; c++ {
		switch {
		case c == 1:
			milli += 60
		case c == 2:
			milli += 10
		case c <= 4:
			milli += 5
		default:
			milli += 2 // 2.5m, rounded down
		}
	}
	return milli
}

// gkeReserved is GKE's documented reservation: 25% of the first 4 GiB of memory, 20% of the next 4,
// 10% of the next 8, 6% of the next 112 and 2% above 128 GiB, plus the tiered CPU reservation.
func gkeReserved(m machine) reserved {
	tiers := []struct{ uptoGiB, percent int64 }{{4, 25}, {8, 20}, {16, 10}, {128, 6}, {1 << 20, 2}}
	mem, prev := int64(0), int64(0)
	for _, t := range tiers {
		if m.memoryGiB > prev {
			mem += (min(m.memoryGiB, t.uptoGiB) - prev) * 1024 * t.percent / 100
		}
		prev = t.uptoGiB
	}
	return reserved{cpuMilli: tieredCPUReserved(m.cpu), memoryMiB: mem}
}

// nodeSpec is everything a flavour decides about one node; simNode turns it into a SimNode.
type nodeSpec struct {
	name        string
	role        role
	machine     machine
	os          osRelease
	runtime     string // nodeInfo.containerRuntimeVersion
	kubelet     string // nodeInfo.kubeletVersion, with the platform's suffix
	providerID  string
	systemUUID  string // nodeInfo.systemUUID where the platform's is recognisable; random otherwise
	labels      map[string]string
	annotations map[string]string
	taints      []corev1.Taint
	reserved    reserved
	// topology is region and zone for cloud nodes: the cloud provider sets topology.kubernetes.io/*
	// and the deprecated failure-domain.beta.kubernetes.io/* labels.
	region, zone string
}

// buildNodes asks spec for the control-plane nodes (there are controlPlanes of them), then the GPU
// workers, then the CPU workers of the scenario, and finishes each into a SimNode.
func buildNodes(s Scenario, controlPlanes int, spec func(r role, i int) nodeSpec) []SimNode {
	s = s.Defaults()
	var nodes []SimNode
	add := func(r role, n int) {
		for i := range n {
			ns := spec(r, i)
			ns.role = r
			if r == gpuWorker && i < len(s.GPUNodeOS) {
				o := s.GPUNodeOS[i]
				ns.os = osRelease{image: o.Image, kernel: o.Kernel, id: o.ID, versionID: o.VersionID}
			}
			nodes = append(nodes, simNode(s, ns))
		}
	}
	add(controlPlane, controlPlanes)
	add(gpuWorker, s.GPUNodes)
	add(cpuWorker, s.CPUNodes)
	return nodes
}

// simNode finishes a node: the labels every kubelet sets, kwok's annotation, capacity, nodeInfo, the
// hardware behind it, and the scenario's NFD and pre-installed-driver labels.
func simNode(s Scenario, n nodeSpec) SimNode {
	labels := map[string]string{
		"kubernetes.io/hostname":  n.name,
		"kubernetes.io/os":        "linux",
		"kubernetes.io/arch":      "amd64",
		"beta.kubernetes.io/os":   "linux",
		"beta.kubernetes.io/arch": "amd64",
	}
	if t := n.machine.instanceType; t != "" {
		labels["node.kubernetes.io/instance-type"] = t
		labels["beta.kubernetes.io/instance-type"] = t
	}
	if n.region != "" {
		labels["topology.kubernetes.io/region"] = n.region
		labels["topology.kubernetes.io/zone"] = n.zone
		labels["failure-domain.beta.kubernetes.io/region"] = n.region
		labels["failure-domain.beta.kubernetes.io/zone"] = n.zone
	}
	maps.Copy(labels, n.labels)

	annotations := map[string]string{
		kwokNodeAnnotation: "fake",
		"volumes.kubernetes.io/controller-managed-attach-detach": "true",
	}
	maps.Copy(annotations, n.annotations)

	if n.systemUUID == "" {
		n.systemUUID = uuidToken(n.name + "/system-uuid")
	}
	hw := standin.Hardware{OSReleaseID: n.os.id, OSVersionID: n.os.versionID, OSTreeVersion: n.os.ostreeVersion}
	if n.role == gpuWorker || n.role == controlPlane && s.GPUControlPlane {
		hw.GPUs = s.GPUsPerNode
		hw.GPUPCIClass = standin.GPUModelFor(n.machine.gpu).Class
		hw.GPUProduct = n.machine.gpu
	}
	info := corev1.NodeSystemInfo{
		MachineID:               hexToken(n.name+"/machine-id", 32),
		SystemUUID:              n.systemUUID,
		BootID:                  uuidToken(n.name + "/boot-id"),
		KernelVersion:           n.os.kernel,
		OSImage:                 n.os.image,
		ContainerRuntimeVersion: n.runtime,
		KubeletVersion:          n.kubelet,
		KubeProxyVersion:        n.kubelet,
		OperatingSystem:         "linux",
		Architecture:            "amd64",
	}
	// Someone else's NFD labels the nodes its worker runs on: the workers; the control plane is
	// tainted on most platforms and NFD's labels are not needed there. That NFD is configured like the
	// GPU operator's and OpenShift's NFD Operator's (deviceLabelFields [vendor]), so the PCI label is
	// pci-10de.present.
	if s.NFDLabels && (n.role != controlPlane || s.GPUControlPlane) {
		maps.Copy(labels, nfd.Labels(hw, info, []string{"vendor"}))
	}
	if s.PreinstalledDriver && hw.GPUs > 0 {
		labels[labelGPUDeployDriver] = "pre-installed"
	}

	capacity, allocatable := nodeResources(n.machine, n.reserved)
	return SimNode{
		Node: corev1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: labels, Annotations: annotations},
			Spec:       corev1.NodeSpec{ProviderID: n.providerID, Taints: n.taints},
			Status: corev1.NodeStatus{
				Capacity:    capacity,
				Allocatable: allocatable,
				NodeInfo:    info,
			},
		},
		Hardware: hw,
	}
}

// nodeResources is what the kubelet reports for a machine. Capacity memory is a little below the
// nominal size (firmware and kernel keep some); allocatable subtracts the platform's reservation,
// the 100Mi memory eviction threshold and the 10% nodefs eviction threshold. nvidia.com/gpu is never
// here: only a running device plugin advertises it.
func nodeResources(m machine, r reserved) (capacity, allocatable corev1.ResourceList) {
	const mi = 1024 * 1024
	// The odd constants keep the numbers from coming out round, as real ones never do.
	memKi := m.memoryGiB*1024*1024*975/1000 - 12_348
	diskKi := m.diskGiB*1024*1024*96/100 - 41_337
	zero := resource.MustParse("0")
	capacity = corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(m.cpu, resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memKi*1024, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(diskKi*1024, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(m.pods, resource.DecimalSI),
		"hugepages-1Gi":                 zero,
		"hugepages-2Mi":                 zero,
	}
	allocatable = corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(m.cpu*1000-r.cpuMilli, resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memKi*1024-(r.memoryMiB+100)*mi, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(diskKi*1024*9/10, resource.DecimalSI),
		corev1.ResourcePods:             *resource.NewQuantity(m.pods, resource.DecimalSI),
		"hugepages-1Gi":                 zero,
		"hugepages-2Mi":                 zero,
	}
	return capacity, allocatable
}

// noScheduleTaint is a NoSchedule taint.
func noScheduleTaint(key, value string) corev1.Taint {
	return corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffectNoSchedule}
}

// kubeadmControlPlane is the role labels and taints kubeadm gives a control-plane node. kubeadm
// (KEP-2067) added the "control-plane" label in v1.20, dropped the "master" label and added the
// "control-plane" taint in v1.24, and dropped the "master" taint in v1.25.
func kubeadmControlPlane(kubeMinor int) (map[string]string, []corev1.Taint) {
	labels := map[string]string{"node.kubernetes.io/exclude-from-external-load-balancers": ""}
	var taints []corev1.Taint
	if kubeMinor >= 20 {
		labels["node-role.kubernetes.io/control-plane"] = ""
	}
	if kubeMinor < 24 {
		labels["node-role.kubernetes.io/master"] = ""
	}
	if kubeMinor < 25 {
		taints = append(taints, noScheduleTaint("node-role.kubernetes.io/master", ""))
	}
	if kubeMinor >= 24 {
		taints = append(taints, noScheduleTaint("node-role.kubernetes.io/control-plane", ""))
	}
	return labels, taints
}

// crdSpec describes one custom resource the platform serves.
type crdSpec struct {
	group, version, kind, plural string
	cluster                      bool // cluster-scoped rather than namespaced
}

// newCRD builds the CRD for a custom resource: one served and stored version, a status subresource,
// and a schema that keeps every field. The sandbox stands in for the platform's API; it does not
// validate its objects.
func newCRD(c crdSpec) apiextensionsv1.CustomResourceDefinition {
	scope := apiextensionsv1.NamespaceScoped
	if c.cluster {
		scope = apiextensionsv1.ClusterScoped
	}
	preserve := true
	meta := metav1.ObjectMeta{Name: c.plural + "." + c.group}
	// The API server accepts CRDs in the Kubernetes project's groups (*.k8s.io, *.kubernetes.io) only
	// with an approval annotation, which the real ones carry.
	if protectedGroup(c.group) {
		approval := "unapproved, a sandbox stand-in"
		if c.group == "snapshot.storage.k8s.io" {
			approval = "https://github.com/kubernetes-csi/external-snapshotter/pull/814"
		}
		meta.Annotations = map[string]string{"api-approved.kubernetes.io": approval}
	}
	return apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: meta,
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: c.group,
			Scope: scope,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural:   c.plural,
				Singular: strings.ToLower(c.kind),
				Kind:     c.kind,
				ListKind: c.kind + "List",
			},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name:    c.version,
				Served:  true,
				Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{
					OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve},
				},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
}

// protectedGroup says whether an API group belongs to the Kubernetes project.
func protectedGroup(group string) bool {
	for _, suffix := range []string{"k8s.io", "kubernetes.io"} {
		if group == suffix || strings.HasSuffix(group, "."+suffix) {
			return true
		}
	}
	return false
}

// newCRDs builds a CRD for each spec.
func newCRDs(specs ...crdSpec) []apiextensionsv1.CustomResourceDefinition {
	var crds []apiextensionsv1.CustomResourceDefinition
	for _, c := range specs {
		crds = append(crds, newCRD(c))
	}
	return crds
}

// snapshotCRDs is the CSI external-snapshotter API, which managed CSI drivers install.
func snapshotCRDs() []crdSpec {
	return []crdSpec{
		{"snapshot.storage.k8s.io", "v1", "VolumeSnapshot", "volumesnapshots", false},
		{"snapshot.storage.k8s.io", "v1", "VolumeSnapshotClass", "volumesnapshotclasses", true},
		{"snapshot.storage.k8s.io", "v1", "VolumeSnapshotContent", "volumesnapshotcontents", true},
	}
}

// object builds an unstructured object from its apiVersion, kind, namespace ("" for cluster-scoped),
// name and the rest of its fields (spec, status, data, …), which may be any JSON-encodable value.
func object(apiVersion, kind, namespace, name string, fields map[string]any) unstructured.Unstructured {
	content := map[string]any{}
	if len(fields) > 0 {
		raw, err := json.Marshal(fields)
		if err != nil {
			panic(fmt.Sprintf("sandbox: fields of %s %s do not encode: %v", kind, name, err)) // a bug in a flavour file
		}
		if err := json.Unmarshal(raw, &content); err != nil {
			panic(err)
		}
	}
	u := unstructured.Unstructured{Object: content}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// typedObject converts a typed API object to unstructured, dropping the empty status and
// creationTimestamp a typed zero value carries.
func typedObject(obj runtime.Object) unstructured.Unstructured {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(fmt.Sprintf("sandbox: %T does not convert: %v", obj, err)) // a bug in a flavour file
	}
	delete(content, "status")
	unstructured.RemoveNestedField(content, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(content, "spec", "template", "metadata", "creationTimestamp")
	return unstructured.Unstructured{Object: content}
}

// namespaceObject is a Namespace with the given labels.
func namespaceObject(name string, labels map[string]string) unstructured.Unstructured {
	return typedObject(&corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
	})
}

// configMapObject is a ConfigMap.
func configMapObject(namespace, name string, data map[string]string) unstructured.Unstructured {
	return typedObject(&corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data:       data,
	})
}

// runtimeClassObject is a RuntimeClass whose handler has the same name.
func runtimeClassObject(name string) unstructured.Unstructured {
	return object("node.k8s.io/v1", "RuntimeClass", "", name, map[string]any{"handler": name})
}

// token returns n characters of alphabet derived from seed: deterministic, so a scenario always
// yields the same names, and spread out, so names look like the platform's random suffixes.
func token(seed string, n int, alphabet string) string {
	var b strings.Builder
	for round := 0; b.Len() < n; round++ {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s#%d", seed, round)))
		for _, c := range sum {
			if b.Len() == n {
				break
			}
			b.WriteByte(alphabet[int(c)%len(alphabet)])
		}
	}
	return b.String()
}

const (
	hexDigits    = "0123456789abcdef"
	base36Digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	// kubeSuffixDigits are the characters Kubernetes' generateName uses (no vowels, no 0/1/3).
	kubeSuffixDigits = "bcdfghjklmnpqrstvwxz2456789"
)

func hexToken(seed string, n int) string { return token(seed, n, hexDigits) }

// uuidToken is a UUID-shaped hex string derived from seed.
func uuidToken(seed string) string {
	h := hexToken(seed, 32)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// nodeSuffix is the i-th of a pool's random-looking node suffixes of width characters of alphabet.
// It is a bijection of i for i < len(alphabet)^width, so suffixes within a pool never collide.
func nodeSuffix(pool string, i, width int, alphabet string) string {
	space := uint64(1)
	for range width {
		space *= uint64(len(alphabet))
	}
	h := fnv.New64a()
	h.Write([]byte(pool))
	// 1000003 is prime and larger than any alphabet here, so it is coprime with space.
	v := (uint64(i)*1000003 + h.Sum64()) % space
	out := make([]byte, width)
	for j := width - 1; j >= 0; j-- {
		out[j] = alphabet[v%uint64(len(alphabet))]
		v /= uint64(len(alphabet))
	}
	return string(out)
}

// ec2UUID is an EC2 instance's system UUID, which begins with "ec2".
func ec2UUID(seed string) string { return "ec2" + uuidToken(seed)[3:] }

// ipv4 returns the address offset after base ("10.0.16.0"), for node IPs in a subnet.
func ipv4(base string, offset int) string {
	var a, b, c, d int
	fmt.Sscanf(base, "%d.%d.%d.%d", &a, &b, &c, &d)
	v := (a<<24 | b<<16 | c<<8 | d) + offset
	return fmt.Sprintf("%d.%d.%d.%d", v>>24&255, v>>16&255, v>>8&255, v&255)
}

// jsonString encodes v as compact JSON, for annotations whose value is JSON.
func jsonString(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(raw)
}
