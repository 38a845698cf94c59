// Package plan turns what detection found, a values profile and the user's options into an ordered,
// printable Plan: the namespace, platform prerequisites, CRDs, the NFD and GPU operator releases with
// their layered values, the taint, and the waits.
//
// It is pure: it reads no cluster, file or environment; everything comes in through Input, so the
// same inputs always give the same Plan, and tests need no fakes. It deliberately does not execute
// anything (package engine does) or format output (package ui does). The engine's Install action
// calls it, and the wizard shows its result for confirmation.
package plan
