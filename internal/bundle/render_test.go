package bundle_test

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/charts"
	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/release"
)

// TestRenderedChartRunsTheBundle renders gpuctl's gpu-operator chart with each bundle's values, as
// `helm template` would, and reads the images back from the operator Deployment and the ClusterPolicy.
func TestRenderedChartRunsTheBundle(t *testing.T) {
	ch, err := release.LoadChart(charts.FS, "gpu-operator")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bundle.List() {
		t.Run(b.Version+" renders an operator and a ClusterPolicy that run its images", func(t *testing.T) {
			// Kubernetes 1.34 is in every bundle's tested range.
			r := &release.Render{Name: "gpu-operator", Namespace: "gpu-operator", Chart: ch, Values: b.Values(), KubeVersion: "v1.34.0"}
			manifest, err := r.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			deploy, policy := objects(t, manifest)

			containers := dig(t, deploy, "spec", "template", "spec", "containers").([]any)
			operator := containers[0].(map[string]any)
			if got, want := operator["image"], b.Images["operator"].String(); got != want {
				t.Errorf("operator container image = %v, want %s", got, want)
			}
			env := map[string]any{}
			for _, e := range operator["env"].([]any) {
				env[e.(map[string]any)["name"].(string)] = e.(map[string]any)["value"]
			}
			if got, want := env["VALIDATOR_IMAGE"], b.Images["validator"].String(); got != want {
				t.Errorf("VALIDATOR_IMAGE = %v, want %s", got, want)
			}
			if got, want := env["DRIVER_MANAGER_IMAGE"], b.Images["driverManager"].String(); got != want {
				t.Errorf("DRIVER_MANAGER_IMAGE = %v, want %s", got, want)
			}

			spec := dig(t, policy, "spec").(map[string]any)
			for path, img := range map[string]bundle.Image{
				"validator":                 b.Images["validator"],
				"nodeStatusExporter":        b.Images["nodeStatusExporter"],
				"driver":                    b.Images["driver"],
				"driver.manager":            b.Images["driverManager"],
				"vgpuManager.driverManager": b.Images["driverManager"],
				"vfioManager.driverManager": b.Images["driverManager"],
				"toolkit":                   b.Images["toolkit"],
				"devicePlugin":              b.Images["devicePlugin"],
				"gfd":                       b.Images["gfd"],
				"dcgmExporter":              b.Images["dcgmExporter"],
				"dcgm":                      b.Images["dcgm"],
				"migManager":                b.Images["migManager"],
				"gds":                       b.Images["gds"],
				"gdrcopy":                   b.Images["gdrcopy"],
				"vgpuDeviceManager":         b.Images["vgpuDeviceManager"],
				"sandboxDevicePlugin":       b.Images["sandboxDevicePlugin"],
				"ccManager":                 b.Images["ccManager"],
				"vfioManager":               b.Images["vfioManager"],
			} {
				got := dig(t, spec, strings.Split(path, ".")...).(map[string]any)
				if got["repository"] != img.Repository || got["image"] != img.Image || got["version"] != img.Version {
					t.Errorf("spec.%s = %v/%v:%v, want %s", path, got["repository"], got["image"], got["version"], img)
				}
			}
		})
	}
}

// objects returns the operator Deployment and the ClusterPolicy of a rendered manifest.
func objects(t *testing.T, manifest string) (deploy, policy map[string]any) {
	t.Helper()
	for _, doc := range strings.Split(manifest, "\n---") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("rendered YAML: %v", err)
		}
		switch obj["kind"] {
		case "Deployment":
			deploy = obj
		case "ClusterPolicy":
			policy = obj
		}
	}
	if deploy == nil || policy == nil {
		t.Fatalf("the render has no Deployment or no ClusterPolicy:\n%s", manifest)
	}
	return deploy, policy
}

func dig(t *testing.T, m map[string]any, path ...string) any {
	t.Helper()
	var cur any = m
	for _, k := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("no %s in the rendered object", strings.Join(path, "."))
		}
		cur = mm[k]
	}
	if cur == nil {
		t.Fatalf("no %s in the rendered object", strings.Join(path, "."))
	}
	return cur
}
