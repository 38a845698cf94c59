package toolchain

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/e2e/upstream"
)

// Where NVIDIA's sources of a release are missing, the sandbox runs the fallback module and says so,
// with how to get the sources; where they are required (CI), that is an error instead.
func TestOperatorFallsBackToTheModuleOnlyWhereSourcesAreMissing(t *testing.T) {
	fallback := OperatorBuild{Release: OperatorModuleVersion, Binary: "/cache/gpu-operator-module/gpu-operator"}
	tools := &Tools{
		Operators:      map[string]OperatorBuild{"v26.7.0": {Release: "v26.7.0", FromSources: true, Binary: "/cache/v26.7.0/gpu-operator"}},
		MissingSources: []string{"v26.3.3"},
		Fallback:       &fallback,
	}
	t.Setenv(upstream.RequireEnv, "")
	if b, warning, err := tools.Operator("v26.7.0"); err != nil || warning != "" || !b.FromSources || b.Release != "v26.7.0" {
		t.Errorf("v26.7.0: %+v, %q, %v; want its build from sources, no warning", b, warning, err)
	}
	b, warning, err := tools.Operator("v26.3.3")
	if err != nil || b.FromSources || b.Release != OperatorModuleVersion {
		t.Errorf("v26.3.3 without sources: %+v, %v; want the fallback module", b, err)
	}
	for _, want := range []string{"v26.3.3", "NOT the release installed", upstream.HowToGet("v26.3.3")} {
		if !strings.Contains(warning, want) {
			t.Errorf("warning %q does not say %q", warning, want)
		}
	}
	t.Setenv(upstream.RequireEnv, "1")
	if _, _, err := tools.Operator("v26.3.3"); !errors.Is(err, upstream.ErrNoSources) || !strings.Contains(err.Error(), upstream.HowToGet("v26.3.3")) {
		t.Errorf("v26.3.3 with sources required: %v; want ErrNoSources with how to get them", err)
	}
}
