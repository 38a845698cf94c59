// Package nfd stands in for Node Feature Discovery where NFD's own programs (package sandbox/nfd) do
// not run: the benches' hundreds of nodes, where a worker process per node does not fit
// (Options.NFDStandIn), OpenShift, NFD versions other than the one built (RunExcept), and machines
// without private mount namespaces. Run plays its worker and master on simulated
// nodes: while an nfd-worker pod runs on a node and an nfd-master pod is ready (installed by anyone:
// the GPU operator's subchart, plain Helm, Red Hat's NFD Operator), it writes the feature labels NFD
// v0.19 would (Labels: kernel, os-release, the GPUs' PCI label as the worker's config names it) and
// removes them when NFD goes away. RunOperator plays Red Hat's NFD Operator on OpenShift: once OLM has
// installed it in a namespace, a NodeFeatureDiscovery there gets its nfd-worker and nfd-master
// (operator.go). Open it when a test needs a label NFD writes, or NFD on OpenShift behaves differently
// than there.
package nfd
