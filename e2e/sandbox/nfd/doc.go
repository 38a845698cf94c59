// Package nfd runs Node Feature Discovery's own programs in the sandbox: nfd-master, nfd-worker and
// nfd-gc of sigs.k8s.io/node-feature-discovery (toolchain.NFDVersion), built from the Go module into
// the tool cache (toolchain.EnsureNFD). The Runner watches for Running pods whose container runs one of
// them from NFD's image of that version (whoever installed it: gpuctl's chart, plain Helm) and runs the
// program as a local process in each pod's place, with the pod's arguments, environment, ConfigMaps
// and service account, as the operator follower runs NVIDIA's controller for its Deployment.
//
// Each nfd-worker runs in its own mount namespace over a tree generated from its node's simulated
// hardware (tree.go: PCI devices under sys/bus/pci/devices, /etc/os-release, the kernel release),
// mounted where the worker DaemonSet's hostPath volumes say (namespace.go). What NFD then writes
// (NodeFeature objects, node labels, their field managers) is NFD's own.
//
// It does not run NFD for Red Hat's NFD Operator (its image is not upstream NFD; the stand-in in
// standin/nfd labels OpenShift's nodes), for pods of NFD's other versions (the stand-in labels their
// nodes: standin/nfd.RunExcept with Runs), nor on the benches' hundreds of nodes, where a process per
// node does not fit (Options.NFDStandIn). Open it when real NFD does not label a sandbox's nodes.
package nfd
