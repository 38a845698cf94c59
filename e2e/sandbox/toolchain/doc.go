// Package toolchain builds and caches the programs the sandbox runs: Kubernetes' servers, etcd and
// kwok (from the modules pinned under e2e/tools), NVIDIA's GPU operator controller of every release of
// gpuctl's catalog (from NVIDIA's sources, else the fallback module), Helm's own CLIs (v4 and v3), and,
// for sandboxes that ask for them, an OCI registry and Flux's source-controller and helm-controller.
// Open it when a tool is missing, rebuilt too often, or a new one is needed; it starts
// nothing (package controlplane runs the servers, package operator the controllers). The cache is
// ~/.cache/gpuctl/sandbox-tools unless GPUCTL_SANDBOX_CACHE says otherwise; a file lock lets parallel
// test binaries share it.
package toolchain
