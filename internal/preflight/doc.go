// Package preflight decides, before gpuctl writes anything, whether an install can go ahead: `gpuctl
// check --pre` prints its Report, and `gpuctl install` runs the same checks before its first write.
//
// What it does:
//   - Checks returns the pre-install checks, grouped by category in the order they are printed (Kubernetes
//     API, Plan, Permissions, Versions, Existing installs, Nodes, Drivers, Scheduling). Each has a stable ID, so a
//     person can skip it (--skip-check) and a program can find it in the JSON output.
//   - A check reads the Env: what detection found, the Plan, the objects the install would write, the
//     version bundle, and the live API for what detection does not carry (SelfSubjectAccessReviews, the
//     target namespace's labels, DaemonSets and nodes for the taint).
//   - The Drivers checks read each GPU node's kernel, OS image and runtime from its Node object, judge the
//     toolkit's containerd settings against the distribution, and with precompiled drivers ask the
//     registry the driver image comes from for its tags (TagLister; package driverimage).
//   - Runner runs them in order and returns a Report; Render prints it the way `linkerd check` does
//     (categories, √ / ‼ / ×, one hint per problem), and the json tags give `-o json`.
//
// A failed check means gpuctl must not go ahead: it would fail half way, fight another installer, or
// leave GPUs unusable. A warning means it can, but a person should know. Skipped checks (by request or
// because they do not apply) are reported as skipped.
//
// What it deliberately does not do:
//   - Change anything in the cluster: every call is a read or a SelfSubjectAccessReview (and, outside
//     the cluster, a registry's tag list).
//   - Detect the cluster or build the Plan: package engine does both and hands them over in the Env.
//   - Probe the nodes themselves (nouveau, Secure Boot): that needs privileged pods, which a pre-install
//     check must not start.
//
// Package engine calls it (engine.Check for `gpuctl check --pre`, and before an install's first write).
package preflight
