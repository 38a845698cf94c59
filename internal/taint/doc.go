// Package taint puts the GPU taint on GPU nodes and takes it off again, safely and reversibly.
//
// What it does:
//   - Taint.Run adds a taint (GPUTaint, nvidia.com/gpu=present:NoSchedule) to named nodes and records on each
//     node, in the annotation AddedTaintsAnnotation, exactly which taints gpuctl added.
//   - Untaint.Run removes exactly the recorded taints and the annotation, and nothing else, so that untainting
//     restores each node's original taints. A taint that was there before gpuctl (GKE's own nvidia.com/gpu taint,
//     a user's taint) is never recorded and therefore never removed.
//   - PlanTaint and PlanUntaint decide, purely, what those do to one node as read (package plan lists
//     them per node in a NodePlan); Apply carries out such a plan: on each planned node exactly the
//     planned change, on no other node, and a node that changed since so that the change no longer
//     holds is reported (ActionChanged, *ChangedError), not overwritten.
//   - Tolerates and Added are pure helpers for the engine's safety checks (will the operator still schedule once
//     the GPU nodes are tainted?) and for status output.
//
// Writes are JSON merge patches that carry the node's resourceVersion as a precondition (see write.go for why),
// run with bounded concurrency, and are retried on 409 Conflict after re-reading the node.
//
// What it deliberately does not do:
//   - Decide which nodes are GPU nodes (package detect and plan do) or whether tainting is safe (the engine
//     checks tolerations with Tolerates before it calls Taint).
//   - Add tolerations to workloads; the Helm values do that (daemonsets.tolerations in NVIDIA/gpu-operator
//     deployments/gpu-operator/values.yaml@v26.7.0).
//   - Evict or drain anything: the taint's effect is NoSchedule, so running pods stay where they are.
//
// Who calls it: internal/runner, for the plan's "taint GPU nodes" step, and internal/engine for `gpuctl taint` / `gpuctl untaint`
// (Apply) and uninstall; internal/plan, for the per-node decisions.
package taint
