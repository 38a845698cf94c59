package step

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
)

func TestNeedsAreTheStepsOwn(t *testing.T) {
	steps := []plan.Step{
		{ID: "crds", Kind: plan.KindCRDs},
		{ID: "release-gpu-operator", Kind: plan.KindRelease, Release: &plan.Release{Name: plan.OperatorRelease}},
		{ID: "wait-nfd", Kind: plan.KindWaitNFD},
		{ID: "taint", Kind: plan.KindTaint},
		{ID: "wait-operator", Kind: plan.KindWaitOperator, Target: plan.OperatorDeployment},
		{ID: "wait-validators", Kind: plan.KindWaitValidators},
	}
	nodesPatch := preflight.Access{Verb: "patch", Resource: "nodes"}
	for _, tc := range []struct {
		name    string
		skip    string // the ID of a step to skip
		want    []preflight.Access
		without []preflight.Access
	}{
		{"Helm's release Secrets in the release namespace, the CRDs, the taint's patches and the waits' watches", "",
			[]preflight.Access{{Namespace: "gpu-operator", Verb: "delete", Resource: "secrets"},
				{Verb: "create", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
				nodesPatch,
				{Namespace: "gpu-operator", Verb: "watch", Group: "apps", Resource: "daemonsets"},
				{Namespace: "gpu-operator", Verb: "watch", Group: "apps", Resource: "deployments"}}, nil},
		{"a skipped taint patches no node", "taint", nil, []preflight.Access{nodesPatch}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &plan.Plan{Namespace: "gpu-operator", Steps: slices.Clone(steps)}
			if s := p.Step(tc.skip); s != nil {
				s.Skip = "--no-taint"
			}
			got, err := Needs(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("no %+v among %+v", w, got)
				}
			}
			for _, w := range tc.without {
				if slices.Contains(got, w) {
					t.Errorf("%+v among the needs", w)
				}
			}
		})
	}
}

// TestEveryKindIsRegistered reads package plan's Kind constants from its source, so that a kind
// declared there and not registered in For fails here, not in a user's run.
func TestEveryKindIsRegistered(t *testing.T) {
	files, err := filepath.Glob("../plan/*.go")
	if err != nil {
		t.Fatal(err)
	}
	decl := regexp.MustCompile(`(?m)^\s*(?:const\s+)?Kind\w+\s+Kind\s*=\s*"([^"]+)"`)
	n := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			n++
			if _, err := For(plan.Kind(m[1])); err != nil {
				t.Errorf("%s: %v", filepath.Base(f), err)
			}
		}
	}
	if n < 20 {
		t.Errorf("found %d Kind constants in package plan; the pattern no longer matches their declarations", n)
	}
	if _, err := For("no-such-kind"); err == nil {
		t.Error("an unknown kind was found")
	}
}
