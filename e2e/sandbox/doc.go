// Package sandbox runs a real Kubernetes control plane (kube-apiserver, etcd, scheduler,
// controller-manager) with kwok-simulated GPU nodes shaped like one distribution (flavor_*.go), the
// real NVIDIA GPU Operator controller of a chosen release (operator*.go), and stand-ins for what a
// real node or platform would run: NFD's labels, the device plugin's allocatable GPUs, OLM
// (standin_*.go). Tests start one with StartT(t, Options{…}); people with e2e/cmd/sandbox.
package sandbox
