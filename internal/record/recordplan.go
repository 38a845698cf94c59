package record

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/render"
)

// PlanCRDs names the CRDs the plan's CRD step applies.
func PlanCRDs(p *plan.Plan) ([]string, error) {
	var out []string
	for _, s := range p.Steps {
		if s.Kind != plan.KindCRDs || s.Skip != "" {
			continue
		}
		for _, name := range s.Charts {
			crds, _, err := render.ChartCRDs(name, s.ChartReleases[name])
			if err != nil {
				return nil, err
			}
			for _, c := range crds {
				out = append(out, c.Name)
			}
		}
	}
	return out, nil
}

// PlanNamespaces names the Namespaces the plan applies.
func PlanNamespaces(p *plan.Plan) []string {
	var out []string
	for _, s := range p.Steps {
		if s.Kind != plan.KindObjects || s.Skip != "" {
			continue
		}
		for _, o := range s.Objects {
			if o["kind"] == "Namespace" && o["apiVersion"] == "v1" {
				if md, ok := o["metadata"].(map[string]any); ok {
					if name, ok := md["name"].(string); ok {
						out = append(out, name)
					}
				}
			}
		}
	}
	return out
}

// PlanObjects are the objects the plan applies outside releases, CRDs and namespaces, as the record
// names them (Created unset).
func PlanObjects(p *plan.Plan) []Object {
	var out []Object
	for _, s := range p.Steps {
		if s.Skip != "" {
			continue
		}
		switch s.Kind {
		case plan.KindObjects:
			for _, o := range s.Objects {
				u := unstructured.Unstructured{Object: o}
				if u.GetKind() == "Namespace" && u.GetAPIVersion() == "v1" {
					continue
				}
				out = append(out, Object{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Name: u.GetName(), Namespace: u.GetNamespace()})
			}
		case plan.KindSecrets:
			for _, sec := range s.Secrets {
				out = append(out, Object{APIVersion: "v1", Kind: "Secret", Name: sec.Name, Namespace: sec.Namespace})
			}
		case plan.KindPSP:
			out = append(out, Object{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding", Name: plan.PSPBindingName, Namespace: s.Target})
		}
	}
	return out
}
