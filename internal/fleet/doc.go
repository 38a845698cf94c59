// Package fleet runs one gpuctl read over many kube contexts: a function per context, at most a
// bounded number at once, each with its own context.Context, and the results collected in the order
// the contexts were given, whatever order they finish in. It also orders gpuctl's exit codes by
// severity (Worst), so a fleet run exits with its worst cluster's code. The documents status and
// verify print for a fleet are internal/ui's (FleetStatus, FleetVerify): fleet imports nothing of
// gpuctl's, so any verb can run over many contexts.
//
// It deliberately knows nothing of kubeconfigs, clients or flags: the CLI builds each context's
// clients inside the function it hands over, and renders the results with internal/ui. It never
// aborts the other contexts for one's failure; only the caller's context (Ctrl-C) cancels them all.
package fleet
