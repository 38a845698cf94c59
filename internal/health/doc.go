// Package health waits for the GPU stack to become ready and explains why when it does not.
//
// What it does:
//   - Waiter blocks until one readiness condition holds: the operator Deployment is Available, NFD has labelled the
//     GPU nodes, a validator pod is Ready on every GPU node, the GPUs are allocatable, the ClusterPolicy is ready.
//     Each wait runs informers (LIST then WATCH, with label and field selectors) and re-evaluates its condition on
//     every change, so it returns as soon as the condition holds, survives watches that expire (the reflector
//     re-lists on 410 Gone) and never polls or GETs objects one by one. Progress is reported through a callback.
//   - When a wait times out or meets a state that will not resolve by itself, it returns a *StuckError that says,
//     in one line, what did not become ready, and carries a Report from Diagnose.
//   - Diagnose gathers, with one LIST per kind, what a human needs to see: the stuck nodes, the pods that are not
//     Ready with their container states, their recent Warning events, a few log tails, and hints for the failure
//     patterns we recognise (NVIDIA/gpu-operator GitHub issues up to v26.7.0).
//
// What it deliberately does not do:
//   - Install, change or repair anything; it only reads.
//   - Emit engine events or render output: the engine turns Progress into events, and Report.String into a
//     failure's Detail.
//   - Decide how long to wait: the caller's context carries the deadline.
//
// Who calls it: internal/runner, for the waits of a plan, and internal/engine for `gpuctl status`.
package health
