// Package detect finds out what kind of Kubernetes cluster gpuctl is talking to and what is already
// on it: the distribution (with the evidence for it), the GPU nodes (with the reasons each one
// counts), the node pools, and any Node Feature Discovery, GPU Operator, ClusterPolicy, device plugin
// or host driver that is already there.
//
// It works in two steps so that the interesting part is easy to test:
//
//   - Gather reads the cluster once into a Snapshot: one LIST per resource kind (never a GET per
//     node), discovery for API groups and the server version, and a handful of optional reads
//     (Helm storage, ClusterPolicies, OLM Subscriptions, OpenShift's ClusterVersion). An optional
//     read that is Forbidden becomes a warning in the Snapshot; failing to list nodes is an error.
//   - Analyze is a pure function from a Snapshot to a Result. Each distribution package distro knows
//     is scored by the signals its file declares (API groups, node labels and annotations, providerID
//     prefixes, kubelet version suffixes, runtime strings; as documented in replicatedhq/troubleshoot
//     pkg/analyze/distribution.go), which Analyze evaluates against the Snapshot, and the best one
//     wins; kubeadm is the fallback when no distribution-specific detector reaches MinConfidence, and says
//     it is a low-confidence guess. Signals of two platforms at once are reported as a conflict. The weights
//     are checked against real Node objects from public sources under testdata/corpus (TestCorpus).
//
// What it deliberately does not do: it never writes to the cluster, never runs probe pods (a host
// driver or nouveau can only be seen from a node; that is preflight's job), never picks values or
// profiles (that is package profile and the planner), and never relies on anything a test sandbox
// adds that a real platform would not show.
//
// Callers: the `gpuctl detect` command prints a Result (Table, or JSON/YAML through its json tags),
// and the planner reads a Result to choose a profile, decide whether to install NFD, whether the GPU
// operator or a device plugin is already there, and whether tainting GPU nodes would leave the
// operator nowhere to run.
package detect
