// Package flavor says what each Kubernetes distribution looks like through the API: its nodes (names,
// labels, annotations, providerID, taints, capacity, nodeInfo, and the Hardware behind them), the API
// groups it serves beyond Kubernetes' own (CRDs), its own objects, and its API server's admission
// plugins. One file per distribution (openshift.go, gke.go, tkgs.go, rke2.go, k3s.go, eks.go, aks.go,
// microk8s.go, kubeadm.go); registry.go lists them and defaults a Scenario; the rest are the builders
// the flavours share. Open it to add a distribution or to correct what one shows; it starts nothing
// (the sandbox creates what a Flavor returns) and each fact names its public source.
package flavor
