package dra

import (
	"crypto/sha256"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// Driver is the DRA driver name of NVIDIA's GPU kubelet plugin, the driver of its ResourceSlices and
// the prefix of its device attributes.
const Driver = "gpu.nvidia.com"

// pluginProgram is the program of the kubelet plugin's "gpus" container: NVIDIA/gpu-operator
// manifests/state-dra-driver/0500_daemonset.yaml@v26.7.0 runs `exec gpu-kubelet-plugin` from a bash
// script, NVIDIA/k8s-dra-driver-gpu deployments/helm/nvidia-dra-driver-gpu/templates/kubeletplugin.yaml
// likewise. The same image's other programs (compute-domain-kubelet-plugin, the compute-domain
// controller, the webhook) publish no GPUs.
const pluginProgram = "gpu-kubelet-plugin"

// operatorDaemonSet is the kubelet plugin's DaemonSet as the GPU operator's GPUCluster controller
// deploys it (NVIDIA/gpu-operator manifests/state-dra-driver/0500_daemonset.yaml@v26.7.0); it always
// has the gpus container.
const operatorDaemonSet = "nvidia-dra-driver-kubelet-plugin"

// IsGPUKubeletPluginPod recognises a pod of NVIDIA's DRA kubelet plugin for GPUs: one of the GPU
// operator's DaemonSet, or one with a container that runs gpu-kubelet-plugin (the driver's chart
// names its DaemonSet <release>-kubelet-plugin and may leave the gpus container out).
func IsGPUKubeletPluginPod(p *corev1.Pod) bool {
	for _, ref := range p.OwnerReferences {
		if ref.Kind == "DaemonSet" && ref.Name == operatorDaemonSet {
			return true
		}
	}
	for i := range p.Spec.Containers {
		if runsPlugin(&p.Spec.Containers[i]) {
			return true
		}
	}
	return false
}

// runsPlugin reports whether any word of the container's command or args (a script's lines included)
// is gpu-kubelet-plugin, possibly by path.
func runsPlugin(c *corev1.Container) bool {
	for _, s := range slices.Concat(c.Command, c.Args) {
		for _, w := range strings.Fields(s) {
			if path.Base(w) == pluginProgram {
				return true
			}
		}
	}
	return false
}

// gpuFacts is what NVML tells the plugin about one GPU product: its name, brand and architecture as
// go-nvlib spells them (NVIDIA/go-nvlib pkg/nvlib/device/device.go: GetBrandAsString,
// GetArchitectureAsString), its CUDA compute capability, and its total memory in MiB as nvidia-smi
// reports it (public nvidia-smi dumps; best effort).
type gpuFacts struct {
	name, brand, architecture, computeCapability string
	memoryMiB                                    int64
}

// productFacts maps the sandbox's GPU products (standin.GPU*) to their NVML facts.
func productFacts(product string) gpuFacts {
	switch product {
	case standin.GPUA100SXM40:
		return gpuFacts{"NVIDIA A100-SXM4-40GB", "Nvidia", "Ampere", "8.0", 40960}
	case standin.GPUA100PCIe80:
		return gpuFacts{"NVIDIA A100 80GB PCIe", "Nvidia", "Ampere", "8.0", 81920}
	case standin.GPUA10G:
		return gpuFacts{"NVIDIA A10G", "Nvidia", "Ampere", "8.6", 23028}
	case standin.GPUL4:
		return gpuFacts{"NVIDIA L4", "Nvidia", "Ada Lovelace", "8.9", 23034}
	case standin.GPUH100SXM80:
		return gpuFacts{"NVIDIA H100 80GB HBM3", "Nvidia", "Hopper", "9.0", 81559}
	case standin.GPUL40S:
		return gpuFacts{"NVIDIA L40S", "Nvidia", "Ada Lovelace", "8.9", 46068}
	case standin.GPUT4:
		return gpuFacts{"Tesla T4", "Nvidia", "Turing", "7.5", 15360}
	case standin.GPURTXA6000:
		return gpuFacts{"NVIDIA RTX A6000", "NvidiaRTX", "Ampere", "8.6", 49140}
	case standin.GPUA100vGPU40C:
		// A C-series vGPU profile is an NVIDIA Virtual Compute Server GPU.
		return gpuFacts{"NVIDIA A100-40C", "NvidiaVCS", "Ampere", "8.0", 40960}
	}
	// A product the sandbox has no facts for: its label with spaces, nothing else known.
	return gpuFacts{strings.ReplaceAll(product, "-", " "), "Unknown", "Unknown", "0.0", 0}
}

// The host driver the simulated nodes have: the GPU operator v26.7.0's default driver
// (NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0, driver.version) and the CUDA
// version NVML reports for its branch (R595: CUDA 13.2; uncertain).
const (
	driverVersion     = "595.91.07"
	cudaDriverVersion = "13.2"
)

// semverOf turns a dotted version ("8.9", "595.91.07") into the semantic version the plugin publishes
// (it parses with Masterminds/semver and prints it back: "8.9.0", "595.91.7"); the API server
// accepts only semantic versions in a VersionValue.
func semverOf(v string) string {
	parts := strings.Split(v, ".")
	nums := make([]string, 3)
	for i := range nums {
		n := 0
		if i < len(parts) {
			n, _ = strconv.Atoi(parts[i])
		}
		nums[i] = strconv.Itoa(n)
	}
	return strings.Join(nums, ".")
}

// gpuUUID is a stable GPU UUID for a node's i-th GPU, in NVML's form (GPU-xxxxxxxx-xxxx-…).
func gpuUUID(node string, i int) string {
	h := sha256.Sum256([]byte(node + "/gpu/" + strconv.Itoa(i)))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// Devices are the devices NVIDIA's kubelet plugin publishes for a node's full GPUs (MIG disabled), one
// per GPU, named gpu-<minor>, with the attributes of GpuInfo.Attributes and the capacity of
// GpuInfo.fullGpuCapacity (kubernetes-sigs/dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/deviceinfo.go
// and partitions.go, read at commit 0545e9e5; NVIDIA/k8s-dra-driver-gpu, the project's home before,
// has the same names): type "gpu", uuid, productName, brand, architecture, cudaComputeCapability,
// driverVersion, cudaDriverVersion, the standard resource.kubernetes.io/pciBusID; capacity memory in
// bytes. Attributes that depend on the machine's topology (pcieRoot, numaNode) or on Fabric Manager,
// and addressingMode (only on coherent platforms), are left out. The sandbox's GPUs are numbered 0…n-1,
// minor numbers included.
func Devices(node string, hw standin.Hardware) []resourceapi.Device {
	f := productFacts(hw.GPUProduct)
	devices := make([]resourceapi.Device, 0, hw.GPUs)
	for i := range hw.GPUs {
		devices = append(devices, resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type":                  {StringValue: ptr.To("gpu")},
				"uuid":                  {StringValue: ptr.To(gpuUUID(node, i))},
				"productName":           {StringValue: ptr.To(f.name)},
				"brand":                 {StringValue: ptr.To(f.brand)},
				"architecture":          {StringValue: ptr.To(f.architecture)},
				"cudaComputeCapability": {VersionValue: ptr.To(semverOf(f.computeCapability))},
				"driverVersion":         {VersionValue: ptr.To(semverOf(driverVersion))},
				"cudaDriverVersion":     {VersionValue: ptr.To(semverOf(cudaDriverVersion))},
				// k8s.io/dynamic-resource-allocation deviceattribute.StandardDeviceAttributePCIBusID.
				"resource.kubernetes.io/pciBusID": {StringValue: ptr.To(fmt.Sprintf("0000:%02x:00.0", 0x10+i))},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: *resource.NewQuantity(f.memoryMiB<<20, resource.BinarySI)},
			},
		})
	}
	return devices
}

// Slice is the ResourceSlice NVIDIA's kubelet plugin has published for node, as the kubelet-plugin
// helper it uses writes it (k8s.io/dynamic-resource-allocation kubeletplugin and resourceslice,
// v0.37): one node-local pool named after the node, spec.nodeName set, owned (controller) by the Node
// so that the garbage collector removes it with the node. The helper names slices by generateName
// "<index>-<driver>-<node>-"; the stand-in uses that prefix with a suffix derived from the node name,
// so that two reconciles cannot create two slices.
func Slice(node *corev1.Node, hw standin.Hardware) *resourceapi.ResourceSlice {
	h := sha256.Sum256([]byte(node.Name))
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("00000-%s-%s-%x", Driver, node.Name, h[:3]),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
			}},
		},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   Driver,
			Pool:     resourceapi.ResourcePool{Name: node.Name, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node.Name),
			Devices:  Devices(node.Name, hw),
		},
	}
}
