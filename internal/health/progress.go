package health

import "slices"

// Progress is a snapshot of a running wait, reported whenever it changes.
type Progress struct {
	// Done and Total count units (nodes, replicas); Total is 0 when nothing is countable yet.
	Done  int `json:"done"`
	Total int `json:"total"`
	// Message is one short line, e.g. "3/4 GPU nodes validated".
	Message string `json:"message"`
	// Pending names what is still waited on, sorted; for node waits these are node names.
	Pending []string `json:"pending,omitempty"`
}

func (p Progress) equal(q Progress) bool {
	return p.Done == q.Done && p.Total == q.Total && p.Message == q.Message && slices.Equal(p.Pending, q.Pending)
}
