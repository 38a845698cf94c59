// Package engine runs gpuctl's verbs against a cluster: Install (detect → plan → execute the Plan's
// steps in order), Detect, Taint and Untaint, and Template. Each verb is a struct whose fields are its
// options, with Run(ctx), in the style of Helm's pkg/action.
//
// Execution goes through package release (Helm SDK), kube (client-go writes), taint and health
// (watch-based waits and diagnosis), and reports a stream of typed Events to a Sink; it never prints.
// It deliberately makes no choices of its own: what to do, with which values, is in the Plan, and the
// only runtime decisions are the ones the Plan delegates (which nodes NFD found GPUs on, whether the
// safety check needs tolerations). The CLI and the wizard call it.
package engine
