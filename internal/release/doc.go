// Package release installs, upgrades and inspects gpuctl's Helm releases through the Helm v4 SDK.
//
// Releases are stored by Helm's own storage driver (Secrets in the release namespace), so plain
// `helm list`, `helm get values` and `helm rollback` work on what gpuctl installs. Helm is kept behind
// this package: nothing else in gpuctl imports helm.sh/helm. Every revision it writes names the gpuctl
// run that wrote it (RunLabel), so a release left pending is recovered only when that run is over, and
// refused (BusyError) when another writer may still be at work.
//
// It deliberately does not apply CRDs (gpuctl server-side applies them itself before an install or
// upgrade, because Helm never upgrades a chart's crds/ directory), does not wait for workloads (the
// engine's health checks do, with better diagnostics), and does not choose values (the plan does).
// The engine calls it.
package release
