package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/detect"
)

func TestLicensingReRuns(t *testing.T) {
	nvaie := map[string]any{"driver": map[string]any{
		"repository": "nvcr.io/nvaie", "imagePullSecrets": []any{"ngc-secret"},
		"licensingConfig": map[string]any{"secretName": "licensing-config"},
	}}
	withSecrets := func(ns string, names ...string) func(*detect.Result) {
		return func(r *detect.Result) {
			for _, n := range names {
				r.Existing.Secrets = append(r.Existing.Secrets, detect.SecretRef{Namespace: ns, Name: n, ManagedBy: "gpuctl"})
			}
		}
	}
	warned := func(p *Plan, want string) bool {
		for _, w := range p.Warnings {
			if strings.Contains(w, want) {
				return true
			}
		}
		return false
	}

	t.Run("a re-run without inputs reuses both existing Secrets and says so", func(t *testing.T) {
		p := build(t, detection("kubeadm", withSecrets("gpu-operator", "licensing-config", "ngc-secret")),
			Options{Set: nvaie, Licensing: Licensing{NGCAPIKeyEnv: "NGC_API_KEY"}})
		s := p.Step("licensing")
		if len(s.Secrets) != 1 || s.Secrets[0].Name != detect.NGCPullSecret || !s.Secrets[0].KeepIfUnset {
			t.Fatalf("secrets %+v: want only ngc-secret, kept unless NGC_API_KEY is set", s.Secrets)
		}
		if !warned(p, "reusing the existing Secrets licensing-config and ngc-secret (unless NGC_API_KEY is set) in gpu-operator") {
			t.Errorf("no warning says the Secrets are reused: %q", p.Warnings)
		}
	})
	t.Run("without an NGC key variable to watch, both are reused and the step is skipped", func(t *testing.T) {
		p := build(t, detection("kubeadm", withSecrets("gpu-operator", "licensing-config", "ngc-secret")), Options{Set: nvaie})
		if s := p.Step("licensing"); !strings.Contains(s.Skip, "reusing the existing Secrets") || len(s.Secrets) != 0 {
			t.Errorf("step %+v", s)
		}
	})
	t.Run("given inputs replace an existing Secret", func(t *testing.T) {
		p := build(t, detection("kubeadm", withSecrets("gpu-operator", "licensing-config", "ngc-secret")),
			Options{Set: nvaie, Licensing: Licensing{NLSTokenFile: "/t/tok", GriddConfFile: "/t/gridd.conf", NGCAPIKeyFile: "/t/key"}})
		s := p.Step("licensing")
		if len(s.Secrets) != 2 || s.Secrets[1].KeepIfUnset || warned(p, "reusing") {
			t.Errorf("step %+v, warnings %q", s, p.Warnings)
		}
	})
	t.Run("on OpenShift too, in the operator's namespace there", func(t *testing.T) {
		charts := map[string]ChartInfo{OLMChart: {Name: OLMChart, Version: "0.1.0"}}
		for k, v := range testCharts {
			charts[k] = v
		}
		p, err := Build(Input{Detection: detection("openshift", withSecrets(OpenShiftOperatorNS, "licensing-config", "ngc-secret")),
			Profile: fakeProfiles, Charts: charts, Options: Options{Set: nvaie}})
		if err != nil {
			t.Fatal(err)
		}
		if s := p.Step("licensing"); !strings.Contains(s.Skip, "reusing the existing Secrets") || !warned(p, "in "+OpenShiftOperatorNS) {
			t.Errorf("step %+v, warnings %q", s, p.Warnings)
		}
	})
	t.Run("Secrets in another namespace are not reused", func(t *testing.T) {
		_, err := Build(Input{Detection: detection("kubeadm", withSecrets("elsewhere", "licensing-config", "ngc-secret")),
			Profile: fakeProfiles, Charts: testCharts, Options: Options{Set: nvaie}})
		if !errors.Is(err, ErrMissingLicense) {
			t.Errorf("err %v, want ErrMissingLicense", err)
		}
	})
	t.Run("one input of a pair given is still missing its partner", func(t *testing.T) {
		_, err := Build(Input{Detection: detection("kubeadm", withSecrets("gpu-operator", "licensing-config", "ngc-secret")),
			Profile: fakeProfiles, Charts: testCharts, Options: Options{Set: nvaie, Licensing: Licensing{NLSTokenFile: "/t/tok"}}})
		if !errors.Is(err, ErrMissingLicense) || !strings.Contains(err.Error(), "--gridd-conf-file") {
			t.Errorf("err %v, want gridd.conf missing", err)
		}
	})
}

func TestFlagsThatDoNotApplyAreWarnings(t *testing.T) {
	t.Run("licensing inputs where the values use no NVAIE Secret", func(t *testing.T) {
		p := build(t, detection("gke"), Options{Licensing: Licensing{NGCAPIKeyFile: "/t/key", NGCAPIKeyEnv: "NGC_API_KEY"}})
		if !strings.Contains(strings.Join(p.Warnings, "\n"), "--ngc-api-key-file: not used") {
			t.Errorf("warnings %q", p.Warnings)
		}
	})
	t.Run("the default NGC key variable alone is no input", func(t *testing.T) {
		p := build(t, detection("gke"), Options{Licensing: Licensing{NGCAPIKeyEnv: "NGC_API_KEY"}})
		if strings.Contains(strings.Join(p.Warnings, "\n"), "not used") {
			t.Errorf("warnings %q", p.Warnings)
		}
	})
	t.Run("licensing inputs on OpenShift where the values use no NVAIE Secret", func(t *testing.T) {
		charts := map[string]ChartInfo{OLMChart: {Name: OLMChart, Version: "0.1.0"}}
		for k, v := range testCharts {
			charts[k] = v
		}
		p, err := Build(Input{Detection: detection("openshift"), Profile: fakeProfiles, Charts: charts,
			Options: Options{Licensing: Licensing{GriddConfFile: "/t/gridd.conf"}}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(p.Warnings, "\n"), "--gridd-conf-file: not used") {
			t.Errorf("warnings %q", p.Warnings)
		}
	})
	t.Run("--channel off OpenShift", func(t *testing.T) {
		p := build(t, detection("gke"), Options{Channel: "stable"})
		if !strings.Contains(strings.Join(p.Warnings, "\n"), "--channel stable: not used") {
			t.Errorf("warnings %q", p.Warnings)
		}
	})
}

// TestNamesSecret: an imagePullSecrets entry names the Secret as a plain name or as {name: ...}.
func TestNamesSecret(t *testing.T) {
	tests := []struct {
		entry any
		want  bool
	}{
		{"ngc-secret", true},
		{map[string]any{"name": "ngc-secret"}, true},
		{"other", false},
		{map[string]any{"name": "other"}, false},
		{map[string]any{}, false},
		{nil, false},
	}
	for _, tc := range tests {
		if got := namesSecret(tc.entry, "ngc-secret"); got != tc.want {
			t.Errorf("namesSecret(%v) = %v, want %v", tc.entry, got, tc.want)
		}
	}
}
