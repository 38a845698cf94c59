package plan

import (
	"reflect"
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
