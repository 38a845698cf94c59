package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/profile"
	"github.com/gpuctl/gpuctl/internal/step"
)

// Template renders every chart, in install order, with the values an install would use: the namespace
// and platform prerequisites first, then each chart with its CRDs. With a Profile it needs no cluster
// (the distribution is taken to be the profile's); without one it detects the cluster.
type Template struct {
	// Clients is needed only when Profile is empty.
	Clients     *kube.Clients
	Namespace   string
	Options     InstallOptions
	KubeVersion string
	// Detection, when set, is used instead of detecting the cluster again (Images detects first).
	Detection *detect.Result
}

// Run returns the rendered manifests and the plan they came from.
func (t *Template) Run(ctx context.Context) (string, *plan.Plan, error) {
	p, err := t.Plan(ctx)
	if err != nil {
		return "", nil, err
	}
	out, err := step.RenderYAML(ctx, p, p.Namespace, t.KubeVersion)
	return out, p, err
}

// Plan is the install Plan the manifests are rendered from, built as install builds it (values files,
// --set, the operator release, the registry and pull secrets, --sharing, --mig, --dra, --precompiled
// and --monitoring applied) and read-only: export hands it to GitOps engines. Its warnings end with
// the render's notes (renderNotes): what it assumed without a cluster, and the node labels an install
// would set, which no render holds.
func (t *Template) Plan(ctx context.Context) (*plan.Plan, error) {
	det, err := t.detection(ctx)
	if err != nil {
		return nil, err
	}
	ns := t.Namespace
	if ns == "" {
		ns = plan.DefaultNamespace
	}
	o := t.Options
	o.renderOnly, o.offline = true, t.offline()
	inst := &Install{Clients: t.installClients(ns)}
	p, err := inst.buildPlan(ctx, det, o)
	if errors.Is(err, plan.ErrMissingLicense) {
		// The values name NVAIE Secrets, and rendering needs no secret material: name the inputs not
		// given so the plan builds, and read none.
		for _, f := range []*string{&o.Licensing.NLSTokenFile, &o.Licensing.GriddConfFile, &o.Licensing.NGCAPIKeyEnv} {
			if *f == "" {
				*f = "(read at install)"
			}
		}
		p, err = inst.buildPlan(ctx, det, o)
	}
	if err != nil {
		return nil, err
	}
	p.Warnings = append(p.Warnings, t.renderNotes(p)...)
	return p, nil
}

// offline: the plan is rendered without a cluster, for the profile's distribution.
func (t *Template) offline() bool { return t.Options.Profile != "" }

// installClients are the clients the plan is built with: the cluster's where it is read (--precompiled
// auto asks the driver's registry with the pull secrets there, as install does), none offline.
func (t *Template) installClients(ns string) *kube.Clients {
	if t.Clients == nil || t.offline() {
		return &kube.Clients{Namespace: ns}
	}
	c := *t.Clients
	c.Namespace = ns
	return &c
}

// detection is what the plan is built for: the profile's distribution (no cluster needed), the
// detection given, or the cluster's.
func (t *Template) detection(ctx context.Context) (*detect.Result, error) {
	switch {
	case t.offline():
		if _, err := profile.Get(t.Options.Profile); err != nil {
			return nil, err
		}
		return t.offlineDetection(), nil
	case t.Detection != nil:
		return t.Detection, nil
	case t.Clients == nil:
		return nil, fmt.Errorf("without --profile, template detects the cluster: no cluster configured")
	}
	return detect.Run(ctx, detect.From(t.Clients))
}
