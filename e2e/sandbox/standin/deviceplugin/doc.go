// Package deviceplugin stands in for the kubelet's side of NVIDIA's device plugin: while a device-plugin
// pod (the GPU operator's, NVIDIA's standalone chart's, GKE's own) is Running and Ready on a node, the
// node's capacity and allocatable carry nvidia.com/gpu for its GPUs; when the plugin goes, allocatable
// drops to 0 as a kubelet's does. Open it when GPU pods do not schedule in the sandbox or a new device
// plugin must be recognised.
package deviceplugin
