// Package runner is the loop every writing verb's plan runs through, and the install lock.
//
//   - Runner (run.go) runs Steps in order: an event when each starts, progresses and ends; results;
//     the first failure stops the run with the step's hint and diagnosis; an interrupt (Ctrl-C) ends
//     it with an *InterruptedError (interrupt.go) saying what finished, what was in flight (its state
//     read back from the cluster) and what never started.
//   - Lock and Locked (lock.go, locked.go) are gpuctl's install lock held by one run of a writing verb.
//
// It knows no verb: install's step kinds are internal/step's, uninstall's steps internal/uninstall's,
// and each turns its plan into Steps.
package runner
