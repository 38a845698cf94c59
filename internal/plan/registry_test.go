package plan

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestMirrorRepository(t *testing.T) {
	for _, tc := range []struct{ repo, want string }{
		{"nvcr.io/nvidia", "m.example:5000/nvidia"},
		{"nvcr.io/nvidia/cloud-native", "m.example:5000/nvidia/cloud-native"},
		{"registry.k8s.io/nfd/node-feature-discovery", "m.example:5000/nfd/node-feature-discovery"},
		{"localhost:5000/x", "m.example:5000/x"},
		{"busybox", "m.example:5000/library/busybox"},
		{"bitnami/kubectl", "m.example:5000/bitnami/kubectl"},
		{"m.example:5000/nvidia", "m.example:5000/nvidia"},
	} {
		t.Run(tc.repo+" moves to the mirror keeping its path", func(t *testing.T) {
			if got := MirrorRepository(tc.repo, "m.example:5000"); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestValidateRegistry(t *testing.T) {
	for _, tc := range []struct {
		mirror string
		ok     bool
	}{
		{"mirror.example:5000", true}, {"harbor.corp/nvidia-mirror", true}, {"localhost:5000", true}, {"localhost", true},
		{"https://mirror.example", false}, {"mirror.example/", false}, {"mirror.example/x:tag", false}, {"mirror", false}, {"", false},
	} {
		t.Run(tc.mirror, func(t *testing.T) {
			if err := ValidateRegistry(tc.mirror); (err == nil) != tc.ok {
				t.Errorf("ValidateRegistry(%q) = %v, want ok=%v", tc.mirror, err, tc.ok)
			}
		})
	}
}

func TestRegistryLayer(t *testing.T) {
	t.Run("every non-empty repository moves, preloaded and empty ones stay", func(t *testing.T) {
		effective := map[string]any{
			"operator":    map[string]any{"repository": "nvcr.io/nvidia", "image": "gpu-operator"},
			"driver":      map[string]any{"repository": "nvcr.io/nvidia", "manager": map[string]any{"repository": "nvcr.io/nvidia/cloud-native"}},
			"vgpuManager": map[string]any{"repository": ""},
			"cos":         map[string]any{"image": map[string]any{"repository": "cos-nvidia-installer", "pullPolicy": "Never"}},
			"image":       map[string]any{"repository": "registry.k8s.io/nfd/node-feature-discovery"},
		}
		want := map[string]any{
			"operator": map[string]any{"repository": "m.io/nvidia"},
			"driver":   map[string]any{"repository": "m.io/nvidia", "manager": map[string]any{"repository": "m.io/nvidia/cloud-native"}},
			"image":    map[string]any{"repository": "m.io/nfd/node-feature-discovery"},
		}
		if got := RegistryLayer("m.io", effective); !reflect.DeepEqual(got, want) {
			t.Errorf("got %v\nwant %v", got, want)
		}
	})
}

func TestBuildAddsTheImageLayers(t *testing.T) {
	const mirror = "mirror.example:5000"
	images := func(r *Release, values map[string]any) (map[string]any, error) {
		return MergeValues(map[string]any{"operator": map[string]any{"repository": "nvcr.io/nvidia"}}, values), nil
	}
	t.Run("--registry goes among the detected facts, below -f", func(t *testing.T) {
		p, err := Build(Input{Detection: detection("kubeadm"), Profile: fakeProfiles, Charts: testCharts, ChartImages: images,
			Options: Options{Registry: mirror, Files: []Layer{{Source: "file values.yaml", Values: map[string]any{"toolkit": map[string]any{"enabled": true}}}}}})
		if err != nil {
			t.Fatal(err)
		}
		layers := p.Step("release-" + OperatorRelease).Release.Layers
		reg, file := -1, -1
		for i, l := range layers {
			switch l.Source {
			case RegistrySource(mirror):
				reg = i
			case "file file values.yaml":
				file = i
			}
		}
		if reg < 0 || file < 0 || reg > file {
			t.Fatalf("layers %+v: want --registry below the file", layers)
		}
		if got := at(layers[reg].Values, "operator", "repository"); got != mirror+"/nvidia" {
			t.Errorf("operator.repository %v, want %s/nvidia", got, mirror)
		}
	})
	t.Run("on OpenShift the plan says OLM deploys the images", func(t *testing.T) {
		p, err := Build(Input{Detection: detection("openshift"), Profile: fakeProfiles, Charts: testCharts, ChartImages: images, Options: Options{Registry: mirror}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(p.Warnings, func(w string) bool { return strings.Contains(w, "not used on OpenShift") }) {
			t.Errorf("warnings %q", p.Warnings)
		}
	})
}
