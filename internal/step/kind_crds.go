package step

import (
	"context"
	"fmt"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/render"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// crdsKind server-side applies the CRDs of the step's embedded charts (each loaded for its upstream
// release), never downgrading a CRD a newer release applied and never narrowing one (kube.ApplyCRDs).
type crdsKind struct{}

// applyCRDs applies (or, as a dry run, decides) the CRDs of the step's charts, each chart loaded for
// its release; the operator's chart also with the CRDs of every operator release gpuctl knows, which
// kube.ApplyCRDs compares with so that it never downgrades a CRD a newer release applied.
func applyCRDs(ctx context.Context, clients *kube.Clients, s *plan.Step, dryRun bool) ([]kube.CRDResult, error) {
	var total []kube.CRDResult
	for _, name := range s.Charts {
		crds, version, err := render.ChartCRDs(name, s.ChartReleases[name])
		if err != nil {
			return nil, err
		}
		var known map[string][]*apiextensionsv1.CustomResourceDefinition
		if name == plan.OperatorRelease {
			if known, err = render.OperatorReleaseCRDs(); err != nil {
				return nil, err
			}
		}
		res, err := (&kube.ApplyCRDs{Client: clients.Extensions, Dynamic: clients.Dynamic, CRDs: crds, Version: version, Releases: known, DryRun: dryRun}).Run(ctx)
		if err != nil {
			return nil, err
		}
		total = append(total, res...)
	}
	return total, nil
}

func (crdsKind) Do(ctx context.Context, x *executor, s *plan.Step, _ func(health.Progress)) (runner.Outcome, error) {
	total, err := applyCRDs(ctx, x.clients, s, false)
	if err != nil {
		return runner.Outcome{}, err
	}
	byAction := map[kube.CRDAction][]string{}
	var kept []string
	for _, r := range total {
		byAction[r.Action] = append(byAction[r.Action], r.Name)
		if r.Action == kube.CRDKept {
			kept = append(kept, r.Name+": "+r.Reason)
		}
	}
	for _, k := range kept {
		x.sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Message: "kept CRD " + k})
	}
	var parts []string
	for _, a := range []kube.CRDAction{kube.CRDCreated, kube.CRDUpdated, kube.CRDUnchanged, kube.CRDKept} {
		if n := len(byAction[a]); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, a))
		}
	}
	changed := len(byAction[kube.CRDCreated])+len(byAction[kube.CRDUpdated]) > 0
	if changed {
		x.clients.Refresh()
	}
	return runner.Outcome{Message: strings.Join(parts, ", "), Changed: changed}, nil
}

// Writes: the CRDs' applies, decided as the run decides them (kube.ApplyCRDs as a dry run).
func (crdsKind) Writes(ctx context.Context, l *lister, s *plan.Step) error {
	res, err := applyCRDs(ctx, l.clients, s, true)
	if err != nil {
		return err
	}
	for _, r := range res {
		w := plan.CRDWrite{Step: s.ID, Name: r.Name, Action: plan.WriteUnchanged, Reason: r.Reason}
		switch r.Action {
		case kube.CRDWouldCreate:
			w.Action = plan.WriteCreate
		case kube.CRDWouldUpdate:
			w.Action = plan.WriteUpdate
		case kube.CRDKept:
			w.Action = plan.WriteKeep
		}
		l.w.CRDs = append(l.w.CRDs, w)
	}
	return nil
}

// State says how many of the CRDs of the step's charts are established.
func (crdsKind) State(ctx context.Context, x *executor, s *plan.Step) (string, error) {
	r, err := crdsKind{}.Recorded(s)
	if err != nil {
		return "", err
	}
	names := r.CRDs
	established, err := x.establishedCRDs(ctx, names)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d/%d CRDs established", established, len(names)), nil
}

// establishedCRDs counts the CRDs of names that exist and are established.
func (x *executor) establishedCRDs(ctx context.Context, names []string) (int, error) {
	established := 0
	for _, n := range names {
		crd, err := x.clients.Extensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, n, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return 0, err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				established++
			}
		}
	}
	return established, nil
}

func (crdsKind) Explained() bool { return false }

// Needs: kube.ApplyCRDs reads, server-side applies, and watches until each CRD is Established.
func (crdsKind) Needs(*plan.Step, string) []preflight.Access {
	return access("", "apiextensions.k8s.io", "customresourcedefinitions", "get", "list", "watch", "create", "patch")
}

// Recorded: the CRDs by name.
func (crdsKind) Recorded(s *plan.Step) (Recorded, error) {
	var r Recorded
	for _, name := range s.Charts {
		crds, _, err := render.ChartCRDs(name, s.ChartReleases[name])
		if err != nil {
			return Recorded{}, err
		}
		for _, c := range crds {
			r.CRDs = append(r.CRDs, c.Name)
		}
	}
	return r, nil
}

// Rendered: nothing of its own; a render takes each release's CRDs from its chart.
func (crdsKind) Rendered(*plan.Step) Rendered { return Rendered{} }

// Exported: the charts' CRDs, as each engine takes them.
func (crdsKind) Exported(s *plan.Step) Exported { return Exported{CRDs: s.Skip == ""} }
