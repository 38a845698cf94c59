// Package uninstall is `gpuctl uninstall`'s room: everything that decides and carries out an
// uninstall, in three parts that do not mix.
//
//   - Read (read*.go) does all the reading: the install record, gpuctl's releases (their labels and
//     manifests), the stack's custom resources, NFD's NodeFeatures, the nodes' labels and managed
//     fields, the taints gpuctl added, and for --purge the recorded objects, CRDs (with their custom
//     resources), CSVs and namespaces (with what they hold). The result is a Snapshot.
//   - Build (plan*.go, labels.go, namespace.go, adopt.go) is pure: from a Snapshot and the Options it
//     makes every decision before the first write, the Plan (--dry-run prints it), or refuses
//     (UnrecordedError, ForeignResourcesError). Permissions, as pure, lists the requests the Plan's run
//     makes, for the engine to ask before the first write.
//   - Executor (execute*.go) carries the Plan out as runner Steps, in the reverse order of install. It
//     decides nothing the Plan did not; it looks again only where the cluster may have changed since
//     (each delete carries the planned UID as a precondition, a namespace's contents are judged again
//     just before it goes, node labels by the Plan's rule once the operator has stopped writing them).
//
// It does not take the install lock, refuse what a GitOps engine manages, ask the API server for
// permissions or print: internal/engine's Uninstall does the first three around it, internal/ui the
// last. The engine calls it; it calls internal/runner's loop and the clients below it.
package uninstall
