// Package podrun runs real programs in the place of simulated pods: kwok reports a pod Running, and
// a Supervisor starts the program the pod's container would run as a local process, restarts it with
// a kubelet-like back-off when it exits, and stops it when the pod goes. It also gives a process
// what a kubelet gives a container: the container's environment with the downward API resolved
// (Env), a kubeconfig with the pod's service account token (Kubeconfig), and files of the ConfigMaps
// the pod mounts (ConfigMapFile).
//
// Callers decide which pods they run and how (package nfd for Node Feature Discovery, package
// gpunode for NVIDIA's device plugin and GPU Feature Discovery). It does not pull images, run init
// containers or isolate processes: where a program must see a node's files, the caller wraps it in
// its own mount namespace.
package podrun
