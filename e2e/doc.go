// Package e2e holds gpuctl's end-to-end tests: the real command line, in-process, against sandbox
// clusters (package e2e/sandbox) with the real NVIDIA GPU operator controller. They skip in -short mode.
//
// Helpers the tests share are in helpers_test.go, grouped: running gpuctl, Helm, sandboxes, reading
// the cluster, waiting, stories; a helper only one test uses stays beside it. Every test and subtest
// runs alone with go test -run:
//   - Every top-level test runs in parallel with the others (make e2e: E2E_PARALLEL at a time); each
//     has its own sandbox. Tests that share one (cleanSandbox) get it to themselves until they end,
//     back as it started, whatever ran before.
//   - A subtest sets up the state it checks itself (installedAt, upgradedTo, uninstalled), or reads
//     what its parent test set up; none reads the effect of a subtest before it.
//   - A story (a Helm history, revision by revision) runs its steps with story: a step run alone gets
//     the steps before it as its set-up.
//
// No test sleeps: a wait polls or watches the state it needs (waitUntil, waitForObject, waitPodsReady),
// bounded by the test's context.
package e2e
