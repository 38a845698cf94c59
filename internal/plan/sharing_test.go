package plan

import (
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/internal/detect"
)

// twoPools: two A100 nodes in pool a100, one L4 node in pool l4.
func twoPools(r *detect.Result) {
	r.GPUNodes = []detect.GPUNode{{Name: "a-1", Pool: "a100"}, {Name: "a-2", Pool: "a100"}, {Name: "l-1", Pool: "l4"}}
}

func TestSharing(t *testing.T) {
	tests := []struct {
		name        string
		sharing     []string
		wantDefault string
		wantData    map[string]string // key → the config's mode and replicas ("time-slicing 4")
		wantNodes   map[string]string
	}{
		{"one pool time-sliced: its nodes name the config, nothing is the default",
			[]string{"a100=time-slicing=4"}, "", map[string]string{"time-slicing-4": "time-slicing 4"},
			map[string]string{"a-1": "time-slicing-4", "a-2": "time-slicing-4"}},
		{"the whole cluster under MPS: the default, no labels",
			[]string{"mps=2"}, "mps-2", map[string]string{"mps-2": "mps 2"}, nil},
		{"a default and a pool of its own, each its own config",
			[]string{"time-slicing=2", "l4=mps=4"}, "time-slicing-2", map[string]string{"time-slicing-2": "time-slicing 2", "mps-4": "mps 4"},
			map[string]string{"l-1": "mps-4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(t, detection("gke", twoPools), Options{Sharing: tt.sharing})
			layer := operatorLayer(p, SharingSource)
			cfg, _ := at(layer, "devicePlugin", "config").(map[string]any)
			if cfg["create"] != true || cfg["name"] != SharingConfigMap || cfg["default"] != tt.wantDefault {
				t.Fatalf("devicePlugin.config = %v, want a ConfigMap %s created with default %q", cfg, SharingConfigMap, tt.wantDefault)
			}
			if at(p.Step("release-"+OperatorRelease).Release.Values, "devicePlugin", "config", "name") != SharingConfigMap {
				t.Error("the operator's values do not name the ConfigMap")
			}
			data, _ := cfg["data"].(map[string]any)
			got := map[string]string{}
			for key, doc := range data {
				got[key] = describeConfig(t, doc.(string))
			}
			if !reflect.DeepEqual(got, tt.wantData) {
				t.Errorf("ConfigMap data %v, want %v", got, tt.wantData)
			}
			step := p.Step("node-labels")
			if step == nil || step.Labels == nil {
				t.Fatalf("no node-labels step: %v", stepIDs(p))
			}
			if !reflect.DeepEqual(step.Labels.Nodes, tt.wantNodes) || step.Labels.Key != SharingLabel {
				t.Errorf("labels %s %v, want %s %v", step.Labels.Key, step.Labels.Nodes, SharingLabel, tt.wantNodes)
			}
			ids := stepIDs(p)
			if i := slices.Index(ids, "node-labels"); i < 1 || ids[i-1] != "release-"+OperatorRelease {
				t.Errorf("steps %v: the labels must come right after the operator release (its ConfigMap has their keys)", ids)
			}
		})
	}

	t.Run("none plans no config and a step that takes gpuctl's labels off", func(t *testing.T) {
		p := build(t, detection("gke", twoPools), Options{Sharing: []string{"none"}})
		if l := operatorLayer(p, SharingSource); l != nil {
			t.Errorf("--sharing none adds values %v", l)
		}
		if s := p.Step("node-labels"); s == nil || len(s.Labels.Nodes) != 0 || s.Skip != "" {
			t.Errorf("node-labels step %+v, want one that labels nothing and runs", s)
		}
	})

	t.Run("without --sharing nothing changes", func(t *testing.T) {
		p := build(t, detection("gke", twoPools), Options{})
		if operatorLayer(p, SharingSource) != nil || p.Step("node-labels") != nil {
			t.Errorf("steps %v", stepIDs(p))
		}
	})
}

// describeConfig reads a config file back in NVIDIA's schema: "MODE REPLICAS", after checking the
// fields gpuctl decides.
func describeConfig(t *testing.T, doc string) string {
	t.Helper()
	var c struct {
		Version string `json:"version"`
		Sharing map[string]struct {
			RenameByDefault            *bool `json:"renameByDefault"`
			FailRequestsGreaterThanOne *bool `json:"failRequestsGreaterThanOne"`
			Resources                  []struct {
				Name     string `json:"name"`
				Replicas int    `json:"replicas"`
			} `json:"resources"`
		} `json:"sharing"`
	}
	if err := yaml.UnmarshalStrict([]byte(doc), &c); err != nil {
		t.Fatalf("%v:\n%s", err, doc)
	}
	if c.Version != "v1" || len(c.Sharing) != 1 {
		t.Fatalf("config:\n%s", doc)
	}
	for mode, s := range c.Sharing {
		if s.RenameByDefault == nil || *s.RenameByDefault || s.FailRequestsGreaterThanOne == nil || !*s.FailRequestsGreaterThanOne {
			t.Errorf("%s: want renameByDefault false and failRequestsGreaterThanOne true, stated:\n%s", mode, doc)
		}
		if len(s.Resources) != 1 || s.Resources[0].Name != "nvidia.com/gpu" {
			t.Fatalf("%s: resources %+v", mode, s.Resources)
		}
		name := map[string]string{"timeSlicing": SharingTimeSlicing, "mps": SharingMPS}[mode]
		return name + " " + strconv.Itoa(s.Resources[0].Replicas)
	}
	return ""
}

func TestSharingRefuses(t *testing.T) {
	tests := []struct {
		name    string
		sharing []string
		o       Options
		says    string
	}{
		{"no replicas", []string{"time-slicing=0"}, Options{}, "at least 2 replicas"},
		{"one time-sliced replica: the plugin refuses it", []string{"time-slicing=1"}, Options{}, `"number of replicas must be >= 2"`},
		{"MPS with one replica", []string{"a100=mps=1"}, Options{}, "at least 2 replicas"},
		{"an unknown mode", []string{"a100=mig=2"}, Options{}, `unknown mode "mig"`},
		{"replicas that are no number", []string{"mps=two"}, Options{}, "is not a number"},
		{"no mode", []string{"4"}, Options{}, "want MODE=N or POOL=MODE=N"},
		{"an unknown pool, naming the pools there are", []string{"h100=mps=2"}, Options{}, `no GPU node pool "h100"; the GPU pools are: a100, l4`},
		{"two choices for one pool", []string{"a100=mps=2", "a100=time-slicing=4"}, Options{}, "pool a100 has a choice already"},
		{"none beside a choice", []string{"none", "mps=2"}, Options{}, "give it alone"},
		{"--set that also chooses the config", []string{"mps=2"},
			Options{Set: map[string]any{"devicePlugin": map[string]any{"config": map[string]any{"name": "mine"}}}}, "--set sets devicePlugin.config too"},
		{"a values file that also chooses the config", []string{"mps=2"},
			Options{Files: []Layer{{Source: "v.yaml", Values: map[string]any{"devicePlugin": map[string]any{"config": map[string]any{"default": "x"}}}}}}, "file v.yaml sets devicePlugin.config too"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			o.Sharing = tt.sharing
			_, err := Build(Input{Detection: detection("gke", twoPools), Profile: fakeProfiles, Charts: testCharts, Options: o})
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %v, want ErrInput saying %q", err, tt.says)
			}
		})
	}
}

func TestSharingChoiceRoundTrip(t *testing.T) {
	in := []string{"time-slicing=4", "pool-a=mps=2"}
	choices, err := ParseSharing(in)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range choices {
		out = append(out, c.String())
	}
	if !slices.Equal(out, in) {
		t.Errorf("%v → %v", in, out)
	}
}
