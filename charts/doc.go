// Package charts holds gpuctl's own Helm charts, embedded in the binary: node-feature-discovery (NFD
// v0.19.0: master, worker, gc and the nfd.k8s-sigs.io CRDs) and gpu-operator (NVIDIA GPU Operator
// v26.7.0: the operator Deployment, its RBAC, the ClusterPolicy and the nvidia.com CRDs).
//
// The charts are written for gpuctl, not copied from upstream; their value keys mirror the upstream
// charts' so that one values file (a gpuctl profile) works with either. The charts render objects only:
// they have no Helm hooks and do not bundle NFD into the GPU Operator release, because gpuctl installs
// NFD first, applies CRDs itself and waits on the result.
//
// This package does not install anything. The release step loads a chart with Load and installs it
// with Helm's action package; Names gives the install order.
package charts
