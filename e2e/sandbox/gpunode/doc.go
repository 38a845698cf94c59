// Package gpunode runs NVIDIA's own device plugin and GPU Feature Discovery (github.com/NVIDIA/
// k8s-device-plugin, toolchain.DevicePluginVersion, built from the Go module into the tool cache) for
// the GPU operator's device-plugin and GFD pods on simulated GPU nodes, in the pods' place, as package
// nfd runs NFD's programs:
//
//   - each node's GPUs are a mock NVML (package mocknvml: libnvidia-ml.so.1 over go-nvml's mock),
//     configured from the node's simulated hardware and its MIG state (standin.MIGHardware), found
//     where the plugin looks for the driver's library (its container driver root);
//   - the device plugin runs in its own mount namespace where the node's device-plugins directory is
//     /var/lib/kubelet/device-plugins, the path it registers from; the kubelet's side is package
//     kubeletdm, one per node, which writes what the plugin registers into the node's status and
//     calls Allocate for the pods bound there;
//   - its config is the one NVIDIA's config-manager picks (run once, as the pod's init container
//     config-manager-init does, from the ConfigMap the pod mounts and the node's
//     nvidia.com/device-plugin.config label); when the label or the node's MIG state changes the
//     plugin and GFD are restarted, as the config-manager sidecar's SIGHUP and the MIG manager's
//     operand restart do on a real node;
//   - GFD publishes its labels as a NodeFeature (its default, NodeFeature API) that the real
//     nfd-master turns into node labels.
//
// It runs pods of the device plugin's images v0.19 and newer with the v0.19.0 build: v0.20.0, which
// GPU operator v26.7.0 ships, is not served as a Go module; the log says which build ran for which
// image. Other pods (older images, GKE's own plugin, nodes whose GPU model the mock does not know) are
// left to the stand-in (standin/deviceplugin.RunExcept with Runs). The MPS control daemon is not run:
// NVIDIA's MPS daemon needs nvidia-cuda-mps-control, a driver binary.
package gpunode
