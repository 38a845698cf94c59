// Package dra stands in for the kubelet plugin of NVIDIA's DRA driver for GPUs (gpu.nvidia.com): while
// a pod running gpu-kubelet-plugin (the GPU operator's GPUCluster DaemonSet
// nvidia-dra-driver-kubelet-plugin, or the driver's own Helm chart's <release>-kubelet-plugin) is
// Running and Ready on a node with GPUs, the node has one resource.k8s.io/v1 ResourceSlice of driver
// gpu.nvidia.com, pool named after the node, owned by the Node, with one device per GPU and the
// attributes and capacity the real plugin publishes (slice.go); when the pod goes, the slice goes. The
// real kube-scheduler then allocates ResourceClaims from those slices.
//
// It creates nothing else: the DeviceClasses (gpu.nvidia.com, mig.nvidia.com) come from the driver's
// chart or the GPU operator, not from the kubelet plugin. It does not prepare claims: the kubelet's
// NodePrepareResources (CDI devices in the container) has no counterpart on a kwok node, where pods
// run without containers. MIG devices, VFIO devices, health and partitionable devices are not
// simulated. Open it when DRA claims do not allocate in the sandbox, or the slice NVIDIA's plugin
// publishes changes.
package dra
