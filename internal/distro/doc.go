// Package distro is what gpuctl knows about each Kubernetes distribution, one file per distribution:
// its name and profile, the signals detection scores it by, where its containerd listens and keeps
// its config, the notes detection adds to its GPU pools, and the quirks the plan, preflight, the
// engine and export branch on (OLM on OpenShift, MIG with a reboot on GKE, the RuntimeClass on RKE2
// and k3s, …). All lists them in detection's order; Get looks one up by name.
//
// Adding a distribution is a file here (and its line in All), its values profile
// (profiles/<name>.yaml) and its corpus of real nodes (internal/detect/testdata/corpus/<name>/).
// Code elsewhere asks a Distribution for a capability (`distro.Get(name).OLM`) instead of comparing
// its name.
//
// It deliberately holds only data and the small functions that belong to it (a Match's test, a
// node-name shape): it does not read the cluster or evaluate signals (package detect does), load
// profiles (package profile does) or judge settings (package preflight does). It imports nothing
// of gpuctl's, so every package may import it.
//
// Callers: detect (signals, the Autopilot variant, pool notes, the fallback), profile
// (ForDistribution), preflight (containerd layouts, quirks), and plan, engine, export and the wizard
// (quirks).
package distro
