// Package sandbox runs a real Kubernetes control plane (kube-apiserver, etcd, scheduler,
// controller-manager) with kwok-simulated GPU nodes shaped like one distribution, the real NVIDIA GPU
// Operator controller of a chosen release, Node Feature Discovery's own programs, and stand-ins for what
// a real node or platform would run: the device plugin's allocatable GPUs, OLM. Tests start one with StartT(t, Options{…});
// people with e2e/cmd/sandbox.
//
// This package is the façade: Start, Cluster and Options, and the wiring of its rooms, which it alone
// imports: controlplane (the servers, PKI, kwok stages), toolchain (building and caching the tools),
// flavor (what each distribution looks like), operator (the follower that runs NVIDIA's controller),
// nfd (NFD's nfd-master, nfd-worker and nfd-gc for NFD's pods),
// gitops (an OCI registry and Flux, on request), and standin with its stand-ins nfd, deviceplugin, migmanager, dra and olm. Open it to change what a test gets from a
// sandbox; docs/design.md#the-sandbox says which room to open for the rest.
package sandbox
