// Package bundle is gpuctl's catalog of the NVIDIA GPU Operator releases it can install: for each
// release (selected with --operator-version), the image of every component, the node-feature-discovery
// image NVIDIA shipped with it, and the Kubernetes, OpenShift and containerd versions NVIDIA tested it
// on (deployments/gpu-operator/values.yaml of NVIDIA/gpu-operator at each release tag and
// https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/platform-support.html).
//
// A Bundle turns into gpu-operator chart values that pin its images (Values) and judges a cluster's
// versions against its tested ranges (CheckKubernetes, CheckOpenShift, CheckContainerd), returning a
// Verdict — supported, newer (warn), older (fail) or unknown — with a message a person can act on.
//
// It deliberately does not read the cluster, merge values, render charts or choose CRDs: the values of
// a Bundle are one layer the planner puts directly over the chart defaults, under profiles and user
// values, so a profile that points driver.repository at a mirror or a user's --set driver.version still
// wins. The charts, templates and CRDs gpuctl embeds are v26.7.0's whatever bundle is chosen; an older
// bundle changes images only.
//
// OperandImages applies the operator's own image rules (ImagePath, isStateEnabled, resolveDriverTag of
// each release) to a rendered ClusterPolicy spec, to list the operand images a release would deploy.
//
// Callers: the planner (Get, then Values), preflight checks (the Check methods, fed by detect), and the
// CLI (List for --operator-version's help and `gpuctl version`).
package bundle
