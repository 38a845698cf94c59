// Package deviceplugin stands in for the kubelet's side of NVIDIA's device plugin and for GPU feature
// discovery: while a device-plugin pod (the GPU operator's, NVIDIA's standalone chart's, GKE's own) is
// Running and Ready on a node, the node's capacity and allocatable carry what NVIDIA's plugin would
// register for the config its pod selects (time-slicing and MPS replicas, renamed resources, MIG
// devices under the single and mixed strategies; Advertise); when the plugin goes, allocatable drops
// to 0 as a kubelet's does. While a GFD pod runs, the node carries GFD's labels for its GPUs, sharing
// and MIG. Open it when GPU pods do not schedule in the sandbox, a new device plugin must be
// recognised, or sharing and MIG resources are not what NVIDIA's plugin would show.
package deviceplugin
