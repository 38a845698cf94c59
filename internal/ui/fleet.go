package ui

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gpuctl/gpuctl/internal/engine"
)

// PrintFleetStatus prints gpuctl status over many contexts: one row per context in the run's order
// (its state in a word, the operator release and profile of its install record, its validated GPU
// FleetStatus is gpuctl status over many contexts (-o json): an entry per context in the order of the run,
// and the worst exit code.
type FleetStatus struct {
	// ExitCode is the worst of the contexts' exit codes: the code gpuctl exits with.
	ExitCode int                `json:"exitCode"`
	Contexts []FleetStatusEntry `json:"contexts"`
}

// FleetStatusEntry is one context's status.
type FleetStatusEntry struct {
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

// FleetVerify is gpuctl verify over many contexts (-o json).
type FleetVerify struct {
	ExitCode int                `json:"exitCode"`
	Contexts []FleetVerifyEntry `json:"contexts"`
}

// FleetVerifyEntry is one context's verify run.
type FleetVerifyEntry struct {
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

// nodes of all, and why it is not healthy), then the tally.
func PrintFleetStatus(w io.Writer, doc *FleetStatus, style Style) error {
	b := &strings.Builder{}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTEXT\tSTATE\tOPERATOR\tPROFILE\tGPU NODES\tREASON")
	healthy, empty := 0, 0
	for _, e := range doc.Contexts {
		operator, profile, nodes := "-", "-", "-"
		if r := e.Result; r != nil {
			if r.Record != nil && !r.Record.Uninstalled {
				operator, profile = OrNone(r.Record.OperatorVersion, "-"), OrNone(r.Record.Profile, "-")
			}
			if r.Installed {
				nodes = fmt.Sprintf("%d/%d", validated(r.Nodes), len(r.Nodes))
			}
		}
		switch {
		case e.ExitCode == 0:
			healthy++
		case e.State == "not-installed":
			empty++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Context, e.State, operator, profile, nodes, oneLine(statusReason(e)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// A cluster with nothing installed is not a failed one (its exit code, 7, still says so).
	mark, also := style.ok(), ""
	switch {
	case healthy+empty < len(doc.Contexts):
		mark = style.fail()
	case empty > 0:
		mark = style.warn()
	}
	if empty > 0 {
		also = fmt.Sprintf(", %d with nothing installed", empty)
	}
	fmt.Fprintf(b, "\nFleet: %s %d/%d contexts healthy%s\n", mark, healthy, len(doc.Contexts), also)
	_, err := io.WriteString(w, b.String())
	return err
}

// statusReason is why a context is not healthy: its first failed check, else its error; "-" for none.
func statusReason(e FleetStatusEntry) string {
	if r := e.Result; r != nil && r.Installed {
		for _, c := range r.Checks {
			if c.State == engine.CheckFailed {
				return c.Name + ": " + c.Message
			}
		}
	}
	return OrNone(e.Error, "-")
}

func validated(nodes []engine.NodeStatus) int {
	n := 0
	for _, node := range nodes {
		if node.Validated {
			n++
		}
	}
	return n
}

// PrintFleetVerify prints gpuctl verify over many contexts: one row per context in the run's order (its
// state in a word, its GPU nodes that passed of those verified, and the first node that did not pass
// with why, or the context's error), then the tally.
func PrintFleetVerify(w io.Writer, doc *FleetVerify, style Style) error {
	b := &strings.Builder{}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTEXT\tSTATE\tPASSED\tREASON")
	passed := 0
	for _, e := range doc.Contexts {
		nodes := "-"
		if r := e.Result; r != nil && !r.DryRun {
			nodes = fmt.Sprintf("%d/%d", passedNodes(r.Nodes), len(r.Nodes))
		}
		if e.ExitCode == 0 {
			passed++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Context, e.State, nodes, oneLine(verifyReason(e)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	mark := style.ok()
	if passed < len(doc.Contexts) {
		mark = style.fail()
	}
	fmt.Fprintf(b, "\nFleet: %s %d/%d contexts passed\n", mark, passed, len(doc.Contexts))
	_, err := io.WriteString(w, b.String())
	return err
}

// verifyReason is the first GPU node that did not pass and why (and how many more did not), what a dry
// run would do, or the context's error; "-" for none.
func verifyReason(e FleetVerifyEntry) string {
	r := e.Result
	if r != nil && r.DryRun && r.Plan != nil {
		return fmt.Sprintf("would delete %d pod(s), create %d", len(r.Plan.Delete), len(r.Plan.Create))
	}
	if r != nil && r.Interrupted == nil {
		var failed []engine.NodeVerification
		for _, n := range r.Nodes {
			if n.Outcome != engine.VerifyPassed {
				failed = append(failed, n)
			}
		}
		if len(failed) > 0 {
			reason := fmt.Sprintf("%s %s", failed[0].Node, failed[0].Outcome)
			if failed[0].Reason != "" {
				reason += ": " + failed[0].Reason
			}
			if len(failed) > 1 {
				reason += fmt.Sprintf(" (and %d more)", len(failed)-1)
			}
			return reason
		}
	}
	return OrNone(e.Error, "-")
}

func passedNodes(nodes []engine.NodeVerification) int {
	n := 0
	for _, node := range nodes {
		if node.Outcome == engine.VerifyPassed {
			n++
		}
	}
	return n
}

// oneLine keeps a table's row on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
