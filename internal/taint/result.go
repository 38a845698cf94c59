package taint

// Action says what Taint or Untaint did, or would do, to one node.
type Action string

const (
	// ActionAdded: the taint was added and recorded.
	ActionAdded Action = "added"
	// ActionAlreadyPresent: the node already had a taint with the same key and effect (gpuctl's from an earlier
	// run, GKE's or a user's); nothing was written.
	ActionAlreadyPresent Action = "already-present"
	// ActionRemoved: at least one recorded taint was removed, and the record with it.
	ActionRemoved Action = "removed"
	// ActionNothingToRemove: no taint recorded by gpuctl was on the node (a stale record is still cleared).
	ActionNothingToRemove Action = "nothing-to-remove"
	// ActionWouldAdd: dry run; Run would add the taint.
	ActionWouldAdd Action = "would-add"
	// ActionWouldRemove: dry run; Run would remove recorded taints.
	ActionWouldRemove Action = "would-remove"
	// ActionChanged: Apply found the node changed since the plan (or gone) so that the planned change no
	// longer holds; nothing was written; NodeResult.Err (a *ChangedError) says how.
	ActionChanged Action = "changed-since-plan"
	// ActionFailed: the node could not be read or written; NodeResult.Err says why.
	ActionFailed Action = "failed"
)

// NodeResult is the outcome for one node.
type NodeResult struct {
	Node   string `json:"node"`
	Action Action `json:"action"`
	Err    error  `json:"-"`
}

// Result is the outcome of a Run, one NodeResult per node in the order of the names passed (sorted by name when
// Untaint found the nodes itself), with counts per Action.
type Result struct {
	Nodes  []NodeResult   `json:"nodes"`
	Counts map[Action]int `json:"counts"`
}

// Count returns how many nodes ended with action a.
func (r Result) Count(a Action) int { return r.Counts[a] }

// Changed returns how many nodes were written, or would be in a dry run.
func (r Result) Changed() int {
	return r.Counts[ActionAdded] + r.Counts[ActionRemoved] + r.Counts[ActionWouldAdd] + r.Counts[ActionWouldRemove]
}
