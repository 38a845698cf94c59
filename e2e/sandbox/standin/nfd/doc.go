// Package nfd stands in for Node Feature Discovery's worker and master on simulated nodes: while an
// nfd-worker pod runs on a node and an nfd-master pod is ready (installed by anyone: the GPU operator's
// subchart, plain Helm, the OLM stand-in's NFD Operator), it writes the feature labels NFD v0.19 would
// (Labels: kernel, os-release, the GPUs' PCI label as the worker's config names it) and removes them
// when NFD goes away. Open it when a test needs a label NFD writes, or to change how the labels follow
// the worker's config. Red Hat's NFD Operator (the NodeFeatureDiscovery resource) is still played by
// package olm.
package nfd
