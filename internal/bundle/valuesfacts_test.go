package bundle

import (
	"slices"
	"strings"
	"testing"
)

func TestCompareValues(t *testing.T) {
	facts := &ValuesFacts{Releases: map[string]ReleaseValues{
		"v1": {Read: []string{"cc.enabled", "driver.old", "driver.resources", "operator.init"}, Tested: []string{"driver.enabled"},
			Defaults: map[string]any{"cc.enabled": false, "driver.enabled": true, "driver.version": "1"}},
		"v2": {Read: []string{"cc.enabled", "driver.kmt", "driver.resources"}, Tested: []string{"driver.enabled"},
			Defaults: map[string]any{"cc.enabled": true, "driver.enabled": true, "driver.version": "2", "new.key": 1},
			Renamed:  map[string]Rename{"driver.old": {To: "driver.kmt", Since: "v2", Evidence: "test"}}},
	}}
	for _, tc := range []struct {
		name     string
		user     map[string]any
		gpuctl   map[string]any
		notRead  []string // key=replacement
		defaults []string
	}{
		{name: "a renamed key the user set names its replacement; changed defaults of keys nobody set are listed",
			user: map[string]any{"driver": map[string]any{"old": true}}, notRead: []string{"driver.old=driver.kmt"},
			defaults: []string{"cc.enabled", "driver.version"}},
		{name: "a key the target release stops reading, without a replacement",
			user: map[string]any{"operator": map[string]any{"init": map[string]any{"image": "cuda"}}}, notRead: []string{"operator.init.image="},
			defaults: []string{"cc.enabled", "driver.version"}},
		{name: "a key under a section the target reads whole is read",
			user: map[string]any{"driver": map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": "1"}}}}, defaults: []string{"cc.enabled", "driver.version"}},
		{name: "a key neither release reads is not about the upgrade, nor is NFD's section",
			user:     map[string]any{"typo": 1, "node-feature-discovery": map[string]any{"x": 1}},
			defaults: []string{"cc.enabled", "driver.version"}},
		{name: "defaults the user or gpuctl set are not listed",
			user: map[string]any{"cc": map[string]any{"enabled": false}}, gpuctl: map[string]any{"driver": map[string]any{"version": "2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := facts.Compare("v1", "v2", tc.user, tc.gpuctl)
			if err != nil {
				t.Fatal(err)
			}
			var notRead, defaults []string
			for _, k := range c.NotRead {
				notRead = append(notRead, k.Key+"="+k.Replacement)
			}
			for _, d := range c.ChangedDefaults {
				defaults = append(defaults, d.Key)
			}
			if !slices.Equal(notRead, tc.notRead) || !slices.Equal(defaults, tc.defaults) {
				t.Errorf("not read %v (want %v), changed defaults %v (want %v)", notRead, tc.notRead, defaults, tc.defaults)
			}
			if c.Empty() != (len(tc.notRead)+len(tc.defaults) == 0) {
				t.Errorf("Empty() = %v", c.Empty())
			}
		})
	}
	t.Run("the same release has no changes, an unknown one is an error", func(t *testing.T) {
		if c, err := facts.Compare("v2", "v2", map[string]any{"driver": map[string]any{"old": 1}}); err != nil || !c.Empty() {
			t.Errorf("%+v %v", c, err)
		}
		if _, err := facts.Compare("v1", "v9", nil); err == nil {
			t.Error("no error for an unknown release")
		}
	})
}

// TestEmbeddedValuesFacts: the committed facts cover every release of the catalog, and say what NVIDIA's
// charts say between v25.10.1 and v26.7.0 (driver.useOpenKernelModules replaced by
// driver.kernelModuleType; ccManager on by default from v26.3).
func TestEmbeddedValuesFacts(t *testing.T) {
	f, err := LoadValuesFacts()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range List() {
		r, ok := f.Releases[b.Version]
		if !ok || len(r.Read) == 0 || !slices.IsSorted(r.Read) {
			t.Errorf("%s: no facts, or unsorted", b.Version)
		}
	}
	to := Default()
	c, err := f.Compare("v25.10.1", to.Version, map[string]any{"driver": map[string]any{"useOpenKernelModules": true}}, to.Values())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Join(c.Lines(), "\n")
	for _, want := range []string{"driver.useOpenKernelModules: v26.7.0 does not read it; NVIDIA replaced it with driver.kernelModuleType",
		`ccManager.enabled: default changes from false to true`} {
		if !strings.Contains(lines, want) {
			t.Errorf("%q not in\n%s", want, lines)
		}
	}
	if strings.Contains(lines, "driver.version") {
		t.Errorf("gpuctl pins the driver version, yet its default is listed:\n%s", lines)
	}
}
