// Package runner carries out the plans of gpuctl's writing verbs.
//
//   - Runner (run.go) runs Steps in order: an event when each starts, progresses and ends; results;
//     the first failure stops the run with the step's hint and diagnosis; an interrupt (Ctrl-C) ends
//     it with an *InterruptedError saying what finished, what was in flight (its state read back from
//     the cluster) and what never started. The install Plan's steps come from internal/step, each
//     kind's Do; other verbs make their own Steps.
//   - Uninstaller (uninstall*.go) makes the UninstallPlan (every decision before the first write:
//     objects by UID, node labels by field manager, custom resources under --purge) and carries it
//     out.
//   - Lock (lock.go) is gpuctl's install lock held by one run of a writing verb.
package runner
