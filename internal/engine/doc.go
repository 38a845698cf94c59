// Package engine holds gpuctl's verbs: Install, Upgrade, Uninstall, TaintNodes and UntaintNodes,
// Verify, Status, Check, Template, Images and Support. Each verb is a struct whose fields are its
// options, with Run(ctx), in the style of Helm's pkg/action, and each reads as an outline:
//
//	judge the inputs (nothing written) → take the install lock → read the cluster (detect, the
//	install record) → build the verb's plan (pure, in internal/plan) → with DryRun, return it →
//	preflight → Confirm → hand the plan's steps to internal/runner → report
//
// A verb makes no choices of its own: what to write, with which values, is in its plan; the runner
// carries the plan out (one handler per step kind) and reports typed events (internal/event); the
// renderers (internal/ui) and the wizard turn them into output. The CLI and the wizard call the verbs.
// Defaults are declared once, in defaults.go.
package engine
