package preflight

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func fixed(id, category string, r Result, fatal bool, ran *[]string) Check {
	return Check{ID: id, Category: category, Description: id + " holds", Fatal: fatal, Run: func(context.Context, *Env) Result {
		*ran = append(*ran, id)
		return r
	}}
}

func TestRunner(t *testing.T) {
	t.Run("skipped checks do not run and show as skipped; the rest keep their order", func(t *testing.T) {
		var ran []string
		r := &Runner{Checks: []Check{
			fixed("a", "A", pass("fine"), false, &ran),
			fixed("b", "A", fail("bad", "fix it"), false, &ran),
			fixed("c", "B", warn("hm", "look"), false, &ran),
		}, Skip: []string{"b"}}
		rep, err := r.Run(context.Background(), &Env{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ran, []string{"a", "c"}) {
			t.Errorf("ran %v", ran)
		}
		if rep.Failed {
			t.Error("a skipped failure failed the report")
		}
		b := rep.Get("b")
		if b == nil || b.Status != StatusSkip || b.Category != "A" || b.Description != "b holds" {
			t.Errorf("skipped result %+v", b)
		}
		if got := rep.IDs(StatusWarn); !slices.Equal(got, []string{"c"}) {
			t.Errorf("warnings %v", got)
		}
	})

	t.Run("an unknown skip ID is an error before anything runs", func(t *testing.T) {
		var ran []string
		r := &Runner{Checks: []Check{fixed("a", "A", pass(""), false, &ran)}, Skip: []string{"nope"}}
		_, err := r.Run(context.Background(), &Env{})
		if !errors.Is(err, ErrUnknownCheck) || len(ran) != 0 {
			t.Errorf("err %v, ran %v", err, ran)
		}
		if err := r.Validate(); !errors.Is(err, ErrUnknownCheck) {
			t.Errorf("Validate: %v", err)
		}
	})

	t.Run("a failed fatal check skips the checks after it", func(t *testing.T) {
		var ran []string
		r := &Runner{Checks: []Check{
			fixed("api", "A", fail("down", "check kubeconfig"), true, &ran),
			fixed("b", "B", pass(""), false, &ran),
		}}
		rep, err := r.Run(context.Background(), &Env{})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Failed || !slices.Equal(ran, []string{"api"}) || rep.Get("b").Status != StatusSkip {
			t.Errorf("failed %v, ran %v, b %+v", rep.Failed, ran, rep.Get("b"))
		}
	})

	t.Run("a failure fails the report and an empty status counts as a pass", func(t *testing.T) {
		var ran []string
		r := &Runner{Checks: []Check{fixed("a", "A", Result{}, false, &ran), fixed("b", "A", fail("x", "y"), false, &ran)}}
		rep, _ := r.Run(context.Background(), &Env{})
		if !rep.Failed || rep.Get("a").Status != StatusPass || !slices.Equal(rep.IDs(StatusFail), []string{"b"}) {
			t.Errorf("%+v", rep)
		}
	})

	t.Run("a cancelled context stops the run with its error", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var ran []string
		_, err := (&Runner{Checks: []Check{fixed("a", "A", pass(""), false, &ran)}}).Run(ctx, &Env{})
		if !errors.Is(err, context.Canceled) || len(ran) != 0 {
			t.Errorf("err %v, ran %v", err, ran)
		}
	})

	t.Run("the default checks have unique IDs and come grouped by category in the documented order", func(t *testing.T) {
		order := []string{CategoryAPI, CategoryPlan, CategoryPermissions, CategoryVersions, CategoryExisting, CategoryNodes, CategoryDrivers, CategoryScheduling}
		seen := map[string]bool{}
		last := 0
		for _, c := range Checks() {
			if seen[c.ID] {
				t.Errorf("duplicate ID %s", c.ID)
			}
			seen[c.ID] = true
			i := slices.Index(order, c.Category)
			if i < last {
				t.Errorf("%s (%s) out of category order", c.ID, c.Category)
			}
			last = i
			if c.Description == "" || c.Run == nil {
				t.Errorf("%s is incomplete", c.ID)
			}
		}
		for _, id := range []string{"api", "permissions", "kubernetes-version", "openshift-version", "containerd-version", "existing-operator",
			"existing-clusterpolicy", "existing-nfd", "device-plugin", "host-driver", "driver-os", "psa", "gpu-nodes", "taint-safety", "autopilot"} {
			if !seen[id] {
				t.Errorf("no check %s", id)
			}
		}
	})

	t.Run("the default checks run on a healthy cluster without failures", func(t *testing.T) {
		rep, err := (&Runner{}).Run(context.Background(), testEnv())
		if err != nil {
			t.Fatal(err)
		}
		if rep.Failed || len(rep.Results) != len(Checks()) {
			t.Errorf("failed %v, %d results: %+v", rep.Failed, len(rep.Results), rep.Results)
		}
	})
}
