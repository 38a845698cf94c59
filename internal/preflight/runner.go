package preflight

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrUnknownCheck is returned for a Skip ID that names no check.
var ErrUnknownCheck = errors.New("unknown check")

// Runner runs checks in order.
type Runner struct {
	// Checks to run; nil means Checks().
	Checks []Check
	// Skip are the IDs of checks not to run; they are reported as skipped. An ID that names no check
	// is an error (ErrUnknownCheck), so a typo does not silently run a check the user meant to skip.
	Skip []string
}

// Report is the outcome of a run.
type Report struct {
	// Results are in the order the checks ran.
	Results []Result `json:"results"`
	// Failed is true when any check failed: gpuctl must not go ahead.
	Failed bool `json:"failed"`
	// InputFailed lists the failed checks that judge the user's inputs (Check.Input).
	InputFailed []string `json:"inputFailed,omitempty"`
}

func (r *Runner) checks() []Check {
	if r.Checks == nil {
		return Checks()
	}
	return r.Checks
}

// Validate reports a Skip ID that names no check, before anything runs.
func (r *Runner) Validate() error {
	var ids []string
	for _, c := range r.checks() {
		ids = append(ids, c.ID)
	}
	for _, s := range r.Skip {
		if !slices.Contains(ids, s) {
			return fmt.Errorf("%w %q: the checks are %s", ErrUnknownCheck, s, strings.Join(ids, ", "))
		}
	}
	return nil
}

// Run runs the checks. The error is for a run that could not happen (an unknown Skip ID, a cancelled
// context); failed checks are in the Report.
func (r *Runner) Run(ctx context.Context, env *Env) (Report, error) {
	if err := r.Validate(); err != nil {
		return Report{}, err
	}
	if env == nil {
		env = &Env{}
	}
	var rep Report
	var stoppedBy string
	for _, c := range r.checks() {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		var res Result
		switch {
		case slices.Contains(r.Skip, c.ID):
			res = skip("--skip-check " + c.ID)
		case stoppedBy != "":
			res = skip("not run: " + stoppedBy)
		default:
			res = c.Run(ctx, env)
		}
		res.ID, res.Category = c.ID, c.Category
		if res.Description == "" {
			res.Description = c.Description
		}
		if res.Status == "" {
			res.Status = StatusPass
		}
		if res.Status == StatusFail {
			rep.Failed = true
			if c.Input {
				rep.InputFailed = append(rep.InputFailed, c.ID)
			}
			if c.Fatal && stoppedBy == "" {
				stoppedBy = "the check \"" + c.Description + "\" failed"
			}
		}
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}

// IDs returns the IDs of the results with the given status, in order.
func (r Report) IDs(s Status) []string {
	var out []string
	for _, res := range r.Results {
		if res.Status == s {
			out = append(out, res.ID)
		}
	}
	return out
}

// Get returns the result of the check with the given ID, or nil.
func (r Report) Get(id string) *Result {
	for i := range r.Results {
		if r.Results[i].ID == id {
			return &r.Results[i]
		}
	}
	return nil
}
