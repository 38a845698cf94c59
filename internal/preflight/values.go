package preflight

import (
	"github.com/gpuctl/gpuctl/internal/plan"
)

// operatorValues are the gpu-operator release's values in the Plan, or nil.
func operatorValues(p *plan.Plan) map[string]any {
	if p == nil {
		return nil
	}
	for _, s := range p.Steps {
		if s.Kind == plan.KindRelease && s.Release != nil && s.Release.Name == plan.OperatorRelease {
			return s.Release.Values
		}
	}
	return nil
}

// enabled reads a <component>.enabled value; unset means the chart's default, true for the driver and
// the toolkit (charts/gpu-operator/values.yaml).
func enabled(values map[string]any, component string) bool {
	c, ok := values[component].(map[string]any)
	if !ok {
		return true
	}
	switch v := c["enabled"].(type) {
	case bool:
		return v
	case string:
		return v != "false"
	}
	return true
}
