package plan

import (
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/detect"
)

// nvidiasRelease is NVIDIA's chart installed with Helm as NVIDIA's and the distributions' guides have
// it (helm install gpu-operator nvidia/gpu-operator -n gpu-operator --set driver.enabled=false): gpuctl's
// release name, no gpuctl label, NFD as its subchart.
func nvidiasRelease(r *detect.Result) {
	h := &detect.HelmRelease{Name: OperatorRelease, Namespace: "gpu-operator", Revision: 1, Status: "deployed", Chart: "gpu-operator", ChartVersion: "v26.7.0"}
	r.Existing.GPUOperator = detect.OperatorInstall{Present: true, Helm: h}
	r.Existing.NFD = detect.NFDInstall{Present: true, Namespaces: []string{"gpu-operator"}, Helm: h}
}

func adoptedValues() *Adopted {
	return &Adopted{
		User: map[string]any{"driver": map[string]any{"enabled": false}, "nfd": map[string]any{"enabled": true},
			"devicePlugin": map[string]any{"version": "v0.19.0"}},
		All: map[string]any{"driver": map[string]any{"enabled": false, "version": "595.91.07"}, "nfd": map[string]any{"enabled": true},
			"devicePlugin": map[string]any{"version": "v0.19.0"}, "toolkit": map[string]any{"enabled": true},
			NFDKey: map[string]any{"worker": map[string]any{"serviceAccount": map[string]any{"name": "node-feature-discovery", "create": false}}}},
	}
}

func TestReleaseOfGpuctlsNameIsOursOnlyByProof(t *testing.T) {
	det := detection("kubeadm", nvidiasRelease)
	_, err := Build(Input{Detection: det, Profile: fakeProfiles, Charts: testCharts})
	if err == nil {
		t.Fatal("a release of gpuctl's name without gpuctl's label was planned over")
	}
	for _, want := range []string{"gpuctl did not install", "Helm release gpu-operator/gpu-operator", "gpuctl.io/managed", "--adopt"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}

	// A plan only rendered (template, export) describes the releases of gpuctl's names whoever applied
	// them: a GitOps engine applies export's, without gpuctl's label.
	if _, err := Build(Input{Detection: det, Profile: fakeProfiles, Charts: testCharts, Options: Options{Render: true}}); err != nil {
		t.Errorf("a rendered plan: %v", err)
	}
	flux := detection("kubeadm", func(r *detect.Result) {
		r.Existing.NFD = detect.NFDInstall{Present: true, Helm: &detect.HelmRelease{Name: NFDRelease, Namespace: "gpu-operator"}}
	})
	if p := build(t, flux, Options{Render: true}); p.Step("release-"+NFDRelease).Skip != "" {
		t.Errorf("a rendered plan drops the NFD release a GitOps engine applied: %s", p.Step("release-"+NFDRelease).Skip)
	}

	det.Existing.GPUOperator.Helm.Gpuctl = true
	if _, err := Build(Input{Detection: det, Profile: fakeProfiles, Charts: testCharts}); err != nil {
		t.Errorf("gpuctl's own labelled release: %v", err)
	}
}

func TestAdoptKeepsTheReleasesValues(t *testing.T) {
	det := detection("kubeadm", nvidiasRelease)
	a := adoptedValues()
	a.Release = det.Existing.GPUOperator.Helm
	p, err := Build(Input{Detection: det, Profile: fakeProfiles, Charts: testCharts, Adopt: a,
		Options: Options{Set: map[string]any{"devicePlugin": map[string]any{"version": "v0.19.3"}}}})
	if err != nil {
		t.Fatal(err)
	}
	op := p.Step("release-" + OperatorRelease).Release
	// The profile turns the driver on; the release's own false is kept above it.
	if got := at(op.Values, "driver", "enabled"); got != false {
		t.Errorf("driver.enabled = %v, want the adopted release's false", got)
	}
	if got := at(op.Values, "nfd", "enabled"); got != false {
		t.Errorf("nfd.enabled = %v, want false: NFD is gpuctl's own release now", got)
	}
	ad := p.Adoption
	if ad == nil {
		t.Fatal("the plan has no Adoption")
	}
	if ad.Release != OperatorRelease || ad.Namespace != "gpu-operator" || !ad.NFDSubchart || ad.Source != AdoptedSource("gpu-operator", OperatorRelease) {
		t.Errorf("adoption %+v", ad)
	}
	if !strings.Contains(strings.Join(ad.Kept, ","), "driver.enabled") {
		t.Errorf("kept %v lacks driver.enabled", ad.Kept)
	}
	var changed *ValueChange
	for i, c := range ad.Changes {
		if c.Key == "devicePlugin.version" {
			changed = &ad.Changes[i]
		}
		if c.Key == "driver.enabled" {
			t.Errorf("driver.enabled listed as changed: %+v", c)
		}
	}
	if changed == nil || changed.From != "v0.19.0" || changed.To != "v0.19.3" || changed.Source != "--set" {
		t.Errorf("changes %+v: want devicePlugin.version v0.19.0 → v0.19.3 from --set", ad.Changes)
	}
	// NFD, the release's subchart, keeps running as it is: gpuctl installs none of its own.
	if s := p.Step("release-" + NFDRelease); s == nil || s.Skip == "" {
		t.Errorf("gpuctl would install an NFD beside the adopted release's subchart: %+v", s)
	}
	if want := (KeptSubchart{Release: OperatorRelease, Namespace: "gpu-operator", Chart: NFDKey}); op.KeepSubchart == nil || *op.KeepSubchart != want {
		t.Errorf("the operator release keeps %+v, want %+v", op.KeepSubchart, want)
	}
	// nfd.enabled went from true to false: the NFD subchart goes, which the plan must say.
	if !strings.Contains(strings.Join(changedKeys(ad), ","), "nfd.enabled") {
		t.Errorf("changes %v lack nfd.enabled", changedKeys(ad))
	}
}

func changedKeys(a *Adoption) []string {
	var out []string
	for _, c := range a.Changes {
		out = append(out, c.Key)
	}
	return out
}

func TestAdoptHint(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    detect.HelmRelease
		want string
	}{
		{"gpuctl's name in the install namespace", detect.HelmRelease{Name: OperatorRelease, Namespace: "gpu-operator"}, "run gpuctl install --adopt"},
		{"gpuctl's name elsewhere", detect.HelmRelease{Name: OperatorRelease, Namespace: "nvidia"}, "gpuctl install -n nvidia --adopt"},
		{"a generated name (helm install --generate-name)", detect.HelmRelease{Name: "gpu-operator-1712345678", Namespace: "gpu-operator"}, "only a release named gpu-operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := AdoptHint(&tc.h, "gpu-operator"); !strings.Contains(got, tc.want) {
				t.Errorf("AdoptHint = %q, want %q in it", got, tc.want)
			}
		})
	}
}
