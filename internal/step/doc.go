// Package step is the install Plan's step kinds: each kind is one type in one file (kind_*.go) with
// everything gpuctl asks of a step of that kind (Kind):
//
//   - Do carries it out (Install runs the Plan's steps through runner.Runner, one Do each);
//   - Writes lists what Do would write, decided as Do decides it (the dry run: Writes);
//   - State reads back what an interrupted Do left in the cluster;
//   - Explained says whether the operator's own diagnosis explains a failed one (diagnose.go);
//   - Needs are the permissions it needs beyond the objects it applies (preflight's permission check);
//   - Recorded, Rendered and Exported are what the install record, a render (template, check --pre:
//     Render, RenderYAML) and a GitOps export (internal/export) hold of it.
//
// For is the one lookup of a plan.Kind. Adding a kind is its plan.Kind constant, one kind_<name>.go
// and one line in For; TestEveryKindIsRegistered fails until that line is there, and
// TestTheDryRunListsWhatTheRunWrites checks a writing kind's Writes against its Do.
//
// Install (install.go) also snapshots what the install record needs before the first write and
// writes the record after the run (install_record.go).
package step
