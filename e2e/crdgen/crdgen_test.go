package crdgen

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestWriteMakesTheChartHoldExactlyTheGeneratedFiles(t *testing.T) {
	chart := t.TempDir()
	for name, body := range map[string]string{
		"crds/clusterpolicies.nvidia.com.yaml":                 "same\n",
		"crds/handwritten.nvidia.com.yaml":                     "stale\n",
		"releases/v26.3.3/crds/nvidiadrivers.nvidia.com.yaml":  "old\n",
		"releases/v1.0.0/crds/clusterpolicies.nvidia.com.yaml": "a release that left the catalog\n",
		"releases/v26.3.3/notes.txt":                           "not a CRD: left alone\n",
		"templates/clusterpolicy.yaml":                         "not a CRD: left alone\n",
	} {
		p := filepath.Join(chart, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string][]byte{
		"crds/clusterpolicies.nvidia.com.yaml":                []byte("same\n"),
		"crds/gpuclusters.nvidia.com.yaml":                    []byte("new\n"),
		"releases/v26.3.3/crds/nvidiadrivers.nvidia.com.yaml": []byte("generated\n"),
	}
	changed, err := Write(chart, files)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"wrote crds/gpuclusters.nvidia.com.yaml",
		"wrote releases/v26.3.3/crds/nvidiadrivers.nvidia.com.yaml",
		"removed crds/handwritten.nvidia.com.yaml",
		"removed releases/v1.0.0/crds/clusterpolicies.nvidia.com.yaml",
	}
	if !slices.Equal(changed, want) {
		t.Errorf("changed %q, want %q", changed, want)
	}
	have, err := Existing(chart)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"crds/clusterpolicies.nvidia.com.yaml", "crds/gpuclusters.nvidia.com.yaml", "releases/v26.3.3/crds/nvidiadrivers.nvidia.com.yaml"}; !slices.Equal(have, want) {
		t.Errorf("the chart holds %q, want %q", have, want)
	}
	if _, err := os.Stat(filepath.Join(chart, "releases", "v1.0.0")); !os.IsNotExist(err) {
		t.Errorf("releases/v1.0.0 is still there: %v", err)
	}
	for _, kept := range []string{"releases/v26.3.3/notes.txt", "templates/clusterpolicy.yaml"} {
		if _, err := os.Stat(filepath.Join(chart, kept)); err != nil {
			t.Errorf("%s: %v", kept, err)
		}
	}
	if again, err := Write(chart, files); err != nil || len(again) != 0 {
		t.Errorf("a second Write changed %q (%v)", again, err)
	}
}

func TestReleasesPutTheDefaultInCRDs(t *testing.T) {
	defaults := 0
	for _, r := range Releases() {
		switch {
		case r.Default:
			defaults++
			if r.Dir() != "crds" {
				t.Errorf("default %s goes to %s", r.Tag, r.Dir())
			}
		case r.Dir() != filepath.Join("releases", r.Tag, "crds"):
			t.Errorf("%s goes to %s", r.Tag, r.Dir())
		}
	}
	if defaults != 1 {
		t.Errorf("%d default releases", defaults)
	}
}
