package engine

import (
	"context"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
)

// adoptable reads the release --adopt takes over: a GPU operator Helm release of gpuctl's name in the
// install namespace that gpuctl did not write (no gpuctl.io/managed label), with its values as `helm
// get values` and `helm get values --all` show them. Nil when there is none: a release gpuctl wrote
// needs no adopting, and one of another name or namespace cannot be (plan.AdoptHint says why).
func (i *Install) adoptable(det *detect.Result) (*plan.Adopted, error) {
	h := det.Existing.GPUOperator.Helm
	if h == nil || h.Gpuctl || det.Existing.GPUOperator.OLM != nil || h.Name != plan.OperatorRelease || h.Namespace != i.Clients.Namespace {
		return nil, nil
	}
	rc, err := release.New(i.Clients.Getter, h.Namespace, nil)
	if err != nil {
		return nil, err
	}
	v, err := rc.GetValues(h.Name)
	if err != nil || v == nil {
		return nil, err
	}
	return &plan.Adopted{Release: h, User: v.User, All: v.All}, nil
}

// adoptedLayer is the values layer the install record keeps of an adopted release's own values, so
// every later install and upgrade layers them where the adopting install did; nil when the run adopts
// nothing and no earlier record carries any.
func adoptedLayer(in *installInputs, p *plan.Plan) *plan.Layer {
	if in.adopt != nil && p != nil && p.Adoption != nil {
		return &plan.Layer{Source: p.Adoption.Source, Values: p.Adoption.Values}
	}
	return in.adopted
}

// readAdoption reads, once detection has run, what the plan layers of an adopted release: with
// --adopt the release to take over (in.adopt); else, where the options carry no adopted layer
// (upgrade passes the recorded one), the one the install record keeps (in.adopted).
func (i *Install) readAdoption(ctx context.Context, o InstallOptions, det *detect.Result, in *installInputs) error {
	var err error
	if o.Adopt {
		if in.adopt, err = i.adoptable(det); err != nil || in.adopt != nil {
			return err
		}
	}
	if in.adopted == nil {
		in.adopted, err = recordedAdoption(ctx, i.Clients)
	}
	return err
}

// recordedAdoption is the values layer of a release an earlier install adopted, from the install
// record of a stack that is installed: every later install layers it again, as upgrade does, so a
// rerun keeps the values the release ran with (driver.enabled=false on a node image with the driver).
func recordedAdoption(ctx context.Context, clients *kube.Clients) (*plan.Layer, error) {
	rec, err := record.Read(ctx, clients.Kube)
	if err != nil || rec == nil || rec.Uninstalled {
		return nil, err
	}
	return rec.Inputs.Adopted, nil
}
