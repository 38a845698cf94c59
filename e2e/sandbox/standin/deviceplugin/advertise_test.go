package deviceplugin

import (
	"errors"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

func TestParseConfigRefusesWhatThePluginRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		ok        bool
	}{
		{"a time-slicing config from NVIDIA's docs parses", `
version: v1
flags:
  migStrategy: none
sharing:
  timeSlicing:
    renameByDefault: false
    failRequestsGreaterThanOne: false
    resources:
    - name: nvidia.com/gpu
      replicas: 4`, true},
		{"JSON parses too", `{"version":"v1","sharing":{"mps":{"resources":[{"name":"nvidia.com/gpu","replicas":2}]}}}`, true},
		{"no version is v1", `sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 2}]}}`, true},
		{"time-slicing of MIG devices parses", `{"sharing":{"timeSlicing":{"resources":[{"name":"nvidia.com/mig-1g.10gb","replicas":2}]}}}`, true},
		{"a device count parses", `{"sharing":{"timeSlicing":{"resources":[{"name":"nvidia.com/gpu","replicas":2,"devices":1}]}}}`, true},
		{"another version is refused", `{"version":"v2"}`, false},
		{"an unknown MIG strategy is refused", `{"flags":{"migStrategy":"some"}}`, false},
		{"time-slicing and MPS at once are refused", `{"sharing":{"timeSlicing":{"resources":[{"name":"nvidia.com/gpu","replicas":2}]},"mps":{"resources":[{"name":"nvidia.com/gpu","replicas":2}]}}}`, false},
		{"zero replicas are refused", `{"sharing":{"timeSlicing":{"resources":[{"name":"nvidia.com/gpu","replicas":0}]}}}`, false},
		{"one MPS replica is refused", `{"sharing":{"mps":{"resources":[{"name":"nvidia.com/gpu","replicas":1}]}}}`, false},
		{"a resource that is not NVIDIA's is refused", `{"sharing":{"timeSlicing":{"resources":[{"name":"example.com/gpu","replicas":2}]}}}`, false},
		{"a rename outside nvidia.com is refused", `{"sharing":{"timeSlicing":{"resources":[{"name":"nvidia.com/gpu","rename":"example.com/x","replicas":2}]}}}`, false},
		{"not YAML is refused", `sharing: [`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.doc))
			var cfgErr *ConfigError
			if tc.ok && err != nil || !tc.ok && !errors.As(err, &cfgErr) {
				t.Errorf("ParseConfig = %v, want ok %v (a *ConfigError otherwise)", err, tc.ok)
			}
		})
	}
}

func TestSelectConfigFollowsTheLabelThenTheDefault(t *testing.T) {
	data := map[string]string{
		"a100": `{"sharing":{"timeSlicing":{"resources":[{"name":"nvidia.com/gpu","replicas":4}]}}}`,
		"any":  `{"sharing":{"timeSlicing":{"resources":[{"name":"nvidia.com/gpu","replicas":2}]}}}`,
	}
	for _, tc := range []struct {
		name, label, def, want string
	}{
		{"the label's key", "a100", "any", "a100"},
		{"no label: the default", "", "any", "any"},
		{"a label naming no key: the default", "h100", "any", "any"},
		{"neither: no config", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, _, err := SelectConfig(data, tc.label, tc.def)
			if key != tc.want || (tc.want == "") != errors.Is(err, errNoConfig) {
				t.Errorf("SelectConfig = %q, %v; want %q", key, err, tc.want)
			}
		})
	}
}

func TestAdvertiseMatchesNVIDIAsDocumentedBehaviour(t *testing.T) {
	h100 := standin.Hardware{GPUs: 2, GPUProduct: standin.GPUH100SXM80}
	l4 := standin.Hardware{GPUs: 4, GPUProduct: standin.GPUL4}
	cfg := func(doc string) PluginConfig {
		c, err := ParseConfig([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	layout := func(gpus ...map[string]int) standin.MIGLayout { return standin.MIGLayout{Config: "test", GPUs: gpus} }
	type res = map[corev1.ResourceName]int64
	for _, tc := range []struct {
		name        string
		hw          standin.Hardware
		cfg         PluginConfig
		migStrategy string
		layout      standin.MIGLayout
		want        res
		labels      map[string]string
		refused     bool
	}{
		{name: "no config: one nvidia.com/gpu per GPU", hw: l4, want: res{"nvidia.com/gpu": 4},
			labels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.count": "4", "nvidia.com/gpu.replicas": "1",
				"nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/mig.capable": "false", "nvidia.com/mig.strategy": "none"}},
		{name: "time-slicing 4 replicas: four times the GPUs, product -SHARED", hw: l4,
			cfg:  cfg(`{"sharing":{"timeSlicing":{"resources":[{"name":"nvidia.com/gpu","replicas":4}]}}}`),
			want: res{"nvidia.com/gpu": 16},
			labels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-L4-SHARED", "nvidia.com/gpu.count": "4", "nvidia.com/gpu.replicas": "4",
				"nvidia.com/gpu.sharing-strategy": "time-slicing"}},
		{name: "renameByDefault: nvidia.com/gpu.shared, nvidia.com/gpu 0, product unchanged", hw: l4,
			cfg:    cfg(`{"sharing":{"timeSlicing":{"renameByDefault":true,"resources":[{"name":"nvidia.com/gpu","replicas":4}]}}}`),
			want:   res{"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 16},
			labels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.replicas": "4"}},
		{name: "a short rename gets the nvidia.com prefix", hw: l4,
			cfg:  cfg(`{"sharing":{"timeSlicing":{"resources":[{"name":"nvidia.com/gpu","rename":"l4-shared","replicas":2}]}}}`),
			want: res{"nvidia.com/gpu": 0, "nvidia.com/l4-shared": 8}},
		{name: "a device count replicates only those devices", hw: l4,
			cfg:  cfg(`{"sharing":{"timeSlicing":{"renameByDefault":true,"resources":[{"name":"nvidia.com/gpu","replicas":3,"devices":1}]}}}`),
			want: res{"nvidia.com/gpu": 3, "nvidia.com/gpu.shared": 3}},
		{name: "MPS: the same arithmetic, strategy mps, mps.capable", hw: l4,
			cfg:    cfg(`{"sharing":{"mps":{"resources":[{"name":"nvidia.com/gpu","replicas":2}]}}}`),
			want:   res{"nvidia.com/gpu": 8},
			labels: map[string]string{"nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/mps.capable": "true", "nvidia.com/gpu.product": "NVIDIA-L4-SHARED"}},
		{name: "single with MIG off: whole GPUs", hw: h100, migStrategy: "single", want: res{"nvidia.com/gpu": 2},
			labels: map[string]string{"nvidia.com/mig.capable": "true", "nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
		{name: "single with all-1g.10gb: the MIG devices as nvidia.com/gpu", hw: h100, migStrategy: "single",
			layout: layout(map[string]int{"1g.10gb": 7}, map[string]int{"1g.10gb": 7}),
			want:   res{"nvidia.com/gpu": 14},
			labels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "nvidia.com/gpu.count": "14"}},
		{name: "single with two profiles is refused", hw: h100, migStrategy: "single",
			layout: layout(map[string]int{"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, map[string]int{"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}), refused: true},
		{name: "single with MIG on one GPU of two is refused", hw: h100, migStrategy: "single",
			layout: layout(map[string]int{"1g.10gb": 7}, nil), refused: true},
		{name: "mixed: nvidia.com/mig-<profile> per profile, whole GPUs as nvidia.com/gpu", hw: h100, migStrategy: "mixed",
			layout: layout(map[string]int{"1g.10gb": 7}, nil),
			want:   res{"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 7},
			labels: map[string]string{"nvidia.com/mig.strategy": "mixed", "nvidia.com/mig-1g.10gb.count": "7", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "2"}},
		{name: "mixed all-balanced", hw: h100, migStrategy: "mixed",
			layout: layout(map[string]int{"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, map[string]int{"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}),
			want:   res{"nvidia.com/mig-1g.10gb": 4, "nvidia.com/mig-2g.20gb": 2, "nvidia.com/mig-3g.40gb": 2}},
		{name: "mixed with time-sliced MIG devices", hw: h100, migStrategy: "mixed",
			cfg:    cfg(`{"sharing":{"timeSlicing":{"resources":[{"name":"nvidia.com/mig-1g.10gb","replicas":2}]}}}`),
			layout: layout(map[string]int{"1g.10gb": 7}, map[string]int{"1g.10gb": 7}),
			want:   res{"nvidia.com/mig-1g.10gb": 28}},
		{name: "a CPU node advertises nothing", hw: standin.Hardware{}, want: res{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cfg.Version == "" {
				tc.cfg.Version = "v1"
			}
			ad, err := Advertise(tc.hw, tc.cfg, tc.migStrategy, tc.layout)
			var cfgErr *ConfigError
			if tc.refused {
				if !errors.As(err, &cfgErr) {
					t.Fatalf("Advertise = %v, %v; want a *ConfigError", ad, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := maps.Clone(ad.Resources)
			if _, ok := tc.want["nvidia.com/gpu"]; !ok && got["nvidia.com/gpu"] == 0 {
				delete(got, "nvidia.com/gpu")
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("resources %v, want %v", ad.Resources, tc.want)
			}
			for k, v := range tc.labels {
				if ad.Labels[k] != v {
					t.Errorf("label %s=%q, want %q (labels %v)", k, ad.Labels[k], v, ad.Labels)
				}
			}
		})
	}
}
