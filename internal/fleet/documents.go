package fleet

import "github.com/gpuctl/gpuctl/internal/engine"

// Status is gpuctl status over many contexts (-o json): an entry per context in the order of the run,
// and the worst exit code.
type Status struct {
	// ExitCode is the worst of the contexts' exit codes: the code gpuctl exits with.
	ExitCode int           `json:"exitCode"`
	Contexts []StatusEntry `json:"contexts"`
}

// StatusEntry is one context's status.
type StatusEntry struct {
	Context string `json:"context"`
	// State is the context's verdict in a word: healthy, not-ready, not-installed, or, without one,
	// unreachable, interrupted or error.
	State    string `json:"state"`
	ExitCode int    `json:"exitCode"`
	// Error is what ended the context's run when it did not report a verdict of its own (unreachable,
	// forbidden, nothing installed); "" when none.
	Error string `json:"error,omitempty"`
	// Result is what gpuctl status -o json prints for the context alone (nil when it was not read).
	Result *engine.StatusResult `json:"result,omitempty"`
}

// Verify is gpuctl verify over many contexts (-o json).
type Verify struct {
	ExitCode int           `json:"exitCode"`
	Contexts []VerifyEntry `json:"contexts"`
}

// VerifyEntry is one context's verify run.
type VerifyEntry struct {
	Context string `json:"context"`
	// State is the context's verdict in a word: passed, failed, planned (--dry-run), not-ready (no GPU
	// node labelled), not-installed, or, without one, locked, refused, unreachable, interrupted or
	// error.
	State    string `json:"state"`
	ExitCode int    `json:"exitCode"`
	Error    string `json:"error,omitempty"`
	// Result is what gpuctl verify -o json prints for the context alone (nil when it did not run).
	Result *engine.VerifyResult `json:"result,omitempty"`
}
