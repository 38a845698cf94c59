package health

import (
	"errors"
	"fmt"
	"strings"
)

// Errors a StuckError may wrap besides context.DeadlineExceeded and API errors, for callers that branch on them
// with errors.Is.
var (
	// ErrOperatorFoundNoGPUNodes: the GPU Operator found no GPU node (ClusterPolicy reason NoGPUNodes).
	// Verify's "no node is labelled a GPU node yet" is engine.ErrNoLabelledGPUNodes.
	ErrOperatorFoundNoGPUNodes = errors.New("the GPU Operator found no GPU nodes")
	// ErrNFDLabelsMissing: no node carries any NFD label (ClusterPolicy reason NFDLabelsMissing).
	ErrNFDLabelsMissing = errors.New("no node has Node Feature Discovery labels")
	// ErrPolicyIgnored: an older ClusterPolicy exists and this one is ignored.
	ErrPolicyIgnored = errors.New("the ClusterPolicy is ignored because an older one exists")
	// ErrRolloutStuck: the Deployment exceeded its progress deadline.
	ErrRolloutStuck = errors.New("the rollout exceeded its progress deadline")
)

// StuckError is returned by a Waiter when what it waited for did not become ready: the deadline passed, or the
// cluster reached a state that will not resolve by itself.
type StuckError struct {
	// What did not become ready, e.g. "validators in gpu-operator".
	What string `json:"what"`
	// Progress is the last progress seen.
	Progress Progress `json:"progress"`
	// Err is the cause: context.DeadlineExceeded, one of the Err* values of this package, or the last error from
	// the API server (e.g. Forbidden).
	Err error `json:"-"`
	// Hint says what to do, when the cause alone tells us; Report.Hints has more.
	Hint string `json:"hint,omitempty"`
	// Report is the diagnosis gathered when the wait gave up.
	Report Report `json:"report"`
}

// Error is one line: what did not become ready, the last progress, and the cause.
func (e *StuckError) Error() string {
	var b strings.Builder
	b.WriteString(e.What)
	b.WriteString(" not ready")
	if e.Progress.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Progress.Message)
	}
	if len(e.Progress.Pending) > 0 {
		fmt.Fprintf(&b, " (waiting for %s)", names(e.Progress.Pending, 3))
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause, so errors.Is(err, context.DeadlineExceeded) and errors.Is(err, ErrOperatorFoundNoGPUNodes) work.
func (e *StuckError) Unwrap() error { return e.Err }

// names joins up to max names and says how many more there are.
func names(all []string, max int) string {
	if len(all) <= max {
		return strings.Join(all, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(all[:max], ", "), len(all)-max)
}
