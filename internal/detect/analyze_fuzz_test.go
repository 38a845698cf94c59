package detect

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fuzzKeys and fuzzValues are what the fuzzer picks labels from: the keys detection reads, so that random
// bytes reach its branches, and values that are real, empty, odd or malformed.
var (
	fuzzKeys = []string{
		"cloud.google.com/gke-accelerator", "cloud.google.com/gke-nodepool", "cloud.google.com/gke-gpu-driver-version",
		"cloud.google.com/gke-os-distribution", "node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type",
		"nvidia.com/gpu.present", "nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu.deploy.driver",
		"feature.node.kubernetes.io/pci-10de.present", "feature.node.kubernetes.io/pci-0302_10de.present",
		"feature.node.kubernetes.io/pci-.present", "feature.node.kubernetes.io/pci-03_10de.present",
		"feature.node.kubernetes.io/system-os_release.ID", "feature.node.kubernetes.io/kernel-version.full",
		"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master", "node.openshift.io/os_id",
		"eks.amazonaws.com/nodegroup", "kubernetes.azure.com/agentpool", "kubernetes.azure.com/accelerator",
		"karpenter.k8s.aws/instance-gpu-manufacturer", "karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-gpu-name",
		"node.kubernetes.io/instance-type", "run.tanzu.vmware.com/tkr", "microk8s.io/cluster", "node.k0sproject.io/role",
		"kubernetes.io/hostname", "topology.kubernetes.io/zone", "kubernetes.azure.com/cluster", "kubernetes.azure.com/role",
		"karpenter.k8s.aws/instance-family", "k3s.io/hostname", "rke2.io/hostname", "nvidia.com/cuda.driver.major",
		"cloud.google.com/gke-boot-disk", "",
	}
	fuzzValues = []string{
		"true", "false", "", "nvidia-tesla-t4", "p4d.24xlarge", "g4ad.xlarge", "a2-highgpu-1g", "Standard_NC6s_v3",
		"Standard_NV16as_v4", "8", "-1", "99999999999999999999", "pre-installed", "nvidia", "ubuntu", "rhcos", "cos",
		"v1.33.4-gke.1", ".", "-", "_", "gpu-pool", "1.29", "v1.33.4+rke2r1", "v1.33.4+k3s1", "\x00", "é", "MC_rg_aks_eastus", "0",
	}
	fuzzProviderIDs = []string{
		"", "gce://p/us-central1-a/n", "aws:///us-east-1a/i-0", "azure:///subscriptions/x", "vsphere://42", "k3s://n", "kwok://n", "://", "gce://",
		"azure:///subscriptions/s/resourceGroups/MC_rg_aks_eastus/providers/Microsoft.Compute/virtualMachineScaleSets/aks-np-1-vmss/virtualMachines/0",
	}
	fuzzRuntimes     = []string{"", "containerd://2.1.4", "cri-o://1.33.1", "docker://28.0.0", "containerd://", "containerd://1.7.27-k3s1", "containerd://1.4.4+azure", "cri-o://1.20.0-0.rhaos4.7.gitfdbdf43.el8.52", "x"}
	fuzzOSImages     = []string{"", "Ubuntu 24.04.2 LTS", "Container-Optimized OS from Google", "Red Hat Enterprise Linux CoreOS 9.6", "Bottlerocket OS 1.41.0 (aws-k8s-1.33-nvidia)", "Amazon Linux 2023", "Red Hat Enterprise Linux CoreOS 47.84.202102161611-0 (Ootpa)", "?"}
	fuzzKubelets     = []string{"", "v1.33.4", "v1.33.4-gke.1200000", "v1.33.4+rke2r1", "v1.33.4+k3s1", "v1.33.4-eks-1", "v1.33.4+vmware.1", "v1.20.0+bd9e442", "v1.16.2-k3s.1", "v1.20.2-k0s1", "v1.33.2+k0s", "1.33", "vX"}
	fuzzNamePatterns = []string{"node-%c%d", "gke-c-pool-4d0fa82%c-%04d", "aks-np%c-%08d-vmss000000", "aks-np%c-20956280-%d", "ip-10-0-%d-%d.ec2.internal"}
	fuzzEffects      = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule, ""}
)

// FuzzAnalyze runs detection over nodes built from the fuzz bytes: Analyze must never panic, and the same
// snapshot must always give the same Result (no map order leaking into the output), whatever the labels,
// providerIDs, nodeInfo, capacity and taints. The seeds run as ordinary test cases.
func FuzzAnalyze(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18})
	f.Add([]byte("GPU nodes with NFD labels and taints, in two pools; a control plane; a cordoned CPU node"))
	f.Add([]byte{2, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		snap := fuzzSnapshot(data)
		got := Analyze(snap)
		again := Analyze(fuzzSnapshot(data))
		if !reflect.DeepEqual(got, again) {
			t.Fatalf("Analyze is not deterministic:\n%+v\n%+v", got, again)
		}
		if len(got.GPUNodes) != got.Nodes.GPU {
			t.Errorf("%d GPU nodes listed, %d counted", len(got.GPUNodes), got.Nodes.GPU)
		}
		if got.Nodes.Total != len(snap.Nodes) {
			t.Errorf("Nodes.Total = %d, want %d", got.Nodes.Total, len(snap.Nodes))
		}
		if _, err := json.Marshal(got); err != nil {
			t.Errorf("the result does not serialise: %v", err)
		}
	})
}

// fuzzSnapshot builds a Snapshot from bytes: a node count, then per node picks of labels, providerID,
// nodeInfo, GPU capacity, taints and cordoning.
func fuzzSnapshot(data []byte) *Snapshot {
	d := &fuzzBytes{data: data}
	snap := &Snapshot{ServerVersion: serverVersion(pick(d, fuzzKubelets))}
	nodes := int(d.next() % 8)
	for i := range nodes {
		// Names are unique, as the API server keeps them; the name sorts apart from the creation order.
		// Some take the shapes detection reads in node names (GKE, AKS, EC2).
		name := fmt.Sprintf(pick(d, fuzzNamePatterns), 'a'+rune(d.next()%6), i)
		n := corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: map[string]string{}},
			Spec:       corev1.NodeSpec{ProviderID: pick(d, fuzzProviderIDs), Unschedulable: d.next()%5 == 0},
			Status: corev1.NodeStatus{
				Capacity: corev1.ResourceList{},
				NodeInfo: corev1.NodeSystemInfo{KubeletVersion: pick(d, fuzzKubelets), OSImage: pick(d, fuzzOSImages), ContainerRuntimeVersion: pick(d, fuzzRuntimes), KernelVersion: pick(d, fuzzValues)},
			},
		}
		for range int(d.next() % 6) {
			n.Labels[pick(d, fuzzKeys)] = pick(d, fuzzValues)
		}
		if d.next()%3 == 0 {
			n.Annotations[pick(d, fuzzKeys)] = pick(d, fuzzValues)
		}
		if c := int64(d.next()%4) - 1; c != 0 {
			n.Status.Capacity[gpuResource] = *resource.NewQuantity(c, resource.DecimalSI)
		}
		for range int(d.next() % 3) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: pick(d, fuzzKeys), Value: pick(d, fuzzValues), Effect: fuzzEffects[int(d.next())%len(fuzzEffects)]})
		}
		snap.Nodes = append(snap.Nodes, n)
	}
	return snap
}

type fuzzBytes struct {
	data []byte
	pos  int
}

func (d *fuzzBytes) next() byte {
	if d.pos >= len(d.data) {
		return 0
	}
	b := d.data[d.pos]
	d.pos++
	return b
}

func pick(d *fuzzBytes, from []string) string { return from[int(d.next())%len(from)] }
