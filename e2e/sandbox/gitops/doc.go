// Package gitops runs, for a running sandbox, what a GitOps-managed cluster has beside Kubernetes: an
// OCI registry (the CNCF distribution registry, plain HTTP on a loopback port, storage in the sandbox's
// directory) and, on request, Flux: its CRDs, the flux-system namespace, and the real source-controller
// and helm-controller as local processes against the sandbox's admin kubeconfig (no leader election,
// watching every namespace, source-controller's artifact server on a loopback port that helm-controller
// fetches charts from).
//
// It does not build the programs (package toolchain does), install Flux's other controllers
// (kustomize, notification, image automation), or give the controllers RBAC of their own: they act as
// the sandbox's admin. The façade (package sandbox) calls Start when Options.Registry or Options.GitOps
// ask for it, and Stop before it stops the control plane.
package gitops
