package bundle

import (
	"io/fs"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/charts"
)

// chartFile loads a YAML file of gpuctl's embedded charts.
func chartFile(t *testing.T, name string) map[string]any {
	t.Helper()
	data, err := fs.ReadFile(charts.FS, name)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := yaml.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// leaves returns every non-map value of a values tree by its dotted path.
func leaves(m map[string]any, prefix string, out map[string]any) map[string]any {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			leaves(sub, prefix+k+".", out)
			continue
		}
		out[prefix+k] = v
	}
	return out
}

// lookup returns the value at a dotted path of a values tree.
func lookup(m map[string]any, path string) (any, bool) {
	var cur any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// imagePaths returns the path of every map in the chart values that names an image (has
// repository, image and version keys), sorted.
func imagePaths(m map[string]any, prefix string) []string {
	var out []string
	_, r := m["repository"]
	_, i := m["image"]
	_, v := m["version"]
	if r && i && v {
		out = append(out, strings.TrimSuffix(prefix, "."))
	}
	for k, sub := range m {
		if sm, ok := sub.(map[string]any); ok {
			out = append(out, imagePaths(sm, prefix+k+".")...)
		}
	}
	sort.Strings(out)
	return out
}

func TestValuesFitTheChart(t *testing.T) {
	chart := chartFile(t, "gpu-operator/values.yaml")
	meta := chartFile(t, "gpu-operator/Chart.yaml")
	appVersion, _ := meta["appVersion"].(string)
	if appVersion == "" {
		t.Fatal("gpu-operator/Chart.yaml has no appVersion")
	}

	for _, b := range List() {
		t.Run(b.Version+" sets only string keys that exist in the chart's values.yaml", func(t *testing.T) {
			got := leaves(b.Values(), "", map[string]any{})
			if len(got) == 0 {
				t.Fatal("Values() is empty")
			}
			for path, v := range got {
				if _, ok := v.(string); !ok {
					t.Errorf("%s = %#v, want a string", path, v)
				}
				cv, ok := lookup(chart, path)
				if !ok {
					t.Errorf("%s is not a key of charts/gpu-operator/values.yaml", path)
					continue
				}
				if _, ok := cv.(string); !ok {
					t.Errorf("%s is %T in the chart, not a string", path, cv)
				}
			}
		})

		t.Run(b.Version+" pins every image the chart names except the user-built vGPU manager", func(t *testing.T) {
			want := slices.DeleteFunc(imagePaths(chart, ""), func(p string) bool {
				if p == "vgpuManager" {
					return true // built by the user from NVIDIA's licensed .run file
				}
				_, ships := b.Images[p]
				return (p == "kataSandboxDevicePlugin" || p == "draDriver") && !ships
			})
			got := b.Values()
			for _, p := range want {
				for _, field := range []string{"repository", "image", "version"} {
					if _, ok := lookup(got, p+"."+field); !ok {
						t.Errorf("%s.%s is not pinned", p, field)
					}
				}
			}
		})
	}

	t.Run("the default release adds nothing to the chart's defaults", func(t *testing.T) {
		for path, v := range leaves(Default().Values(), "", map[string]any{}) {
			cv, _ := lookup(chart, path)
			if cv == "" && strings.HasSuffix(path, ".version") {
				// operator, validator and nodeStatusExporter leave their version to appVersion.
				cv = appVersion
			}
			if v != cv {
				t.Errorf("%s = %v, chart default %v", path, v, cv)
			}
		}
	})

	t.Run("the default release is the chart's appVersion", func(t *testing.T) {
		if Default().Version != appVersion {
			t.Errorf("default %s, chart appVersion %s", Default().Version, appVersion)
		}
	})

	t.Run("an older release changes the image versions and nothing else", func(t *testing.T) {
		old, err := Get("v25.10.1")
		if err != nil {
			t.Fatal(err)
		}
		vals := old.Values()
		for _, p := range []struct{ path, want string }{
			{"operator.version", "v25.10.1"},
			{"validator.version", "v25.10.1"},
			{"driver.version", "580.105.08"},
			{"driver.manager.version", "v0.9.1"},
			{"vgpuManager.driverManager.version", "v0.9.1"},
			{"vfioManager.driverManager.version", "v0.9.1"},
			{"vfioManager.repository", "nvcr.io/nvidia"},
			{"vfioManager.image", "cuda"},
			{"vfioManager.version", "13.0.1-base-ubi9"},
			{"toolkit.version", "v1.18.1"},
		} {
			if got, _ := lookup(vals, p.path); got != p.want {
				t.Errorf("%s = %v, want %s", p.path, got, p.want)
			}
		}
		if _, ok := vals["kataSandboxDevicePlugin"]; ok {
			t.Errorf("kataSandboxDevicePlugin is pinned, but v25.10.1 has none")
		}
		for path := range leaves(vals, "", map[string]any{}) {
			field := path[strings.LastIndex(path, ".")+1:]
			if !slices.Contains([]string{"repository", "image", "version"}, field) {
				t.Errorf("%s is not an image field", path)
			}
		}
	})

	t.Run("Values returns a new map every time", func(t *testing.T) {
		b := Default()
		v := b.Values()
		v["operator"].(map[string]any)["version"] = "changed"
		if got, _ := lookup(b.Values(), "operator.version"); got != "v26.7.0" {
			t.Errorf("operator.version = %v after changing an earlier result", got)
		}
	})
}

func TestNFDValuesFitTheNFDChart(t *testing.T) {
	chart := chartFile(t, "node-feature-discovery/values.yaml")
	meta := chartFile(t, "node-feature-discovery/Chart.yaml")

	for _, b := range List() {
		t.Run(b.Version+" sets only keys of the NFD chart's values.yaml", func(t *testing.T) {
			for path := range leaves(b.NFDValues(), "", map[string]any{}) {
				if _, ok := lookup(chart, path); !ok {
					t.Errorf("%s is not a key of charts/node-feature-discovery/values.yaml", path)
				}
			}
		})
	}

	t.Run("the default release's NFD is the NFD chart's own image", func(t *testing.T) {
		want := map[string]any{"image": map[string]any{
			"repository": mustLookup(t, chart, "image.repository"),
			"tag":        meta["appVersion"],
		}}
		if got := Default().NFDValues(); !reflect.DeepEqual(got, want) {
			t.Errorf("NFDValues() = %v, want %v", got, want)
		}
	})
}

func mustLookup(t *testing.T, m map[string]any, path string) any {
	t.Helper()
	v, ok := lookup(m, path)
	if !ok {
		t.Fatalf("no %s", path)
	}
	return v
}
