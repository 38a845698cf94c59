// Package migmanager stands in for NVIDIA's MIG manager (k8s-mig-manager, the GPU operator's
// nvidia-mig-manager DaemonSet) on the sandbox's kwok nodes, which have no GPUs to partition: while a
// MIG-manager pod runs on a node, the node's nvidia.com/mig.config label picks a config of NVIDIA's
// mig-parted (NVIDIA/mig-parted, the operator's default-mig-parted-config ConfigMap, or the one the
// pod mounts at /mig-parted-config), the stand-in applies it to the node's simulated GPUs and drives
// nvidia.com/mig.config.state through pending to success, or to failed when a GPU cannot take it
// (NVIDIA/mig-parted deployments/gpu-operator/reconfigure-mig.go at v0.15.0; the operator's
// docs, https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-mig.html). The
// MIG devices it applied are the GPUs' state (standin.MIGHardware, in the sandbox's memory, as MIG mode
// lives on the GPU), which the device-plugin stand-in reads where the real plugin asks NVML. Open it when MIG reconfiguration in the sandbox does not do what NVIDIA's does; the device
// plugin's side is in package deviceplugin.
package migmanager
