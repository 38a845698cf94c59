// Package standin is the kit the sandbox's stand-ins share: a small controller loop (RunController
// with a rate-limited work queue), informer helpers (OnAnyChange, the pod indexes) and pod predicates,
// and the Hardware of a simulated node with its GPUs' MIG profiles and MIG layout (MIGLayout), which
// the stand-ins read where a real agent would inspect the machine. The stand-ins themselves are its
// subpackages: nfd (feature labels, and Red Hat's NFD Operator's objects), deviceplugin
// (nvidia.com/gpu, sharing and MIG resources, GPU feature discovery's labels), migmanager (MIG
// reconfiguration), dra (NVIDIA's DRA kubelet plugin's ResourceSlices) and olm (OpenShift's
// Operator Lifecycle Manager). Open this package to change what every stand-in does alike; open a
// subpackage for one stand-in. It imports nothing of the sandbox's.
package standin
