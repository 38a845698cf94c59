// Package profile loads gpuctl's values profiles (the YAML files embedded by package profiles) and
// picks one for a detected distribution.
//
// A Profile splits its file in two: Values, the gpu-operator chart values (NVIDIA's own keys), and
// NFD, the top-level node-feature-discovery: section, which gpuctl passes to its NFD chart and not
// to the operator chart. The description comes from the file's "# description:" header.
//
// It deliberately does not merge values, apply gpuctl's detected overrides or user values, or render
// charts: the planner layers those on top of a Profile. It reads only the embedded files, never the
// cluster.
//
// Callers: the planner (ForDistribution, then Get), `gpuctl profiles` (List), and the wizard.
package profile
