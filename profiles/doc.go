// Package profiles embeds gpuctl's values profiles: one YAML file per platform, written in the
// NVIDIA gpu-operator chart's own value keys (NVIDIA/gpu-operator
// deployments/gpu-operator/values.yaml@v26.7.0), so any of them can also be passed to NVIDIA's
// chart with `helm install -f`.
//
// Each file starts with a "# description: <one line>" header, and every setting carries a comment
// naming the fact behind it and its source. A top-level node-feature-discovery: section holds the
// values for the NFD chart (upstream NFD chart keys); with NVIDIA's chart that is exactly the key of
// its NFD subchart, and gpuctl passes it to its own NFD chart instead of the operator chart.
//
// A profile holds a platform's static settings only. gpuctl layers what it detects on top at a
// higher precedence (tolerations for a GPU taint, driver.enabled=false for a host driver, nfd.enabled
// when NFD already runs, …), and the user's own values on top of that.
//
// This package only embeds the files; package internal/profile parses and selects them.
package profiles
