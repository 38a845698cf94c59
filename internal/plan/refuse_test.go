package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/detect"
)

// Citations the refusals must carry: where NVIDIA's words are.
const (
	citeValidateFlags = "NVIDIA/k8s-device-plugin cmd/nvidia-device-plugin/main.go, validateFlags, v0.19.0"
	citeConfig        = "NVIDIA/k8s-device-plugin api/config/v1/config.go, parseConfigFrom, v0.19.0"
	citeMPSDaemon     = "NVIDIA/k8s-device-plugin cmd/mps-control-daemon/mps/device.go, (*mpsDevice).assertReplicas, v0.19.0"
	citeDRADocs       = "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-dra.html"
)

// ownPluginConfig is -f values that create a device-plugin ConfigMap of the user's own with one config.
func ownPluginConfig(key, doc string) []Layer {
	return []Layer{{Source: "mine.yaml", Values: map[string]any{"devicePlugin": map[string]any{"config": map[string]any{
		"create": true, "name": "my-plugin-config", "default": key, "data": map[string]any{key: doc}}}}}}
}

// pluginEnv is --set devicePlugin.env with one variable.
func pluginEnv(name, value string) map[string]any {
	return map[string]any{"devicePlugin": map[string]any{"env": []any{map[string]any{"name": name, "value": value}}}}
}

const (
	mpsDoc = "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 3\n"
	tsDoc  = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 3\n"
)

func TestRefuseWhatComponentsRefuse(t *testing.T) {
	precompiled := Options{Precompiled: PrecompiledAuto, Set: map[string]any{"gds": map[string]any{"enabled": true}}}
	tests := []struct {
		name  string
		det   *detect.Result
		facts *PrecompiledFacts
		opts  Options
		want  []string // in the one-line refusal: what was asked, the component's words, where they are
	}{
		{"MPS for the whole cluster under --mig mixed is refused with the device plugin's words",
			detection("gke", twoPools), nil, Options{Sharing: []string{"mps=2"}, MIG: []string{"mixed"}},
			[]string{"--sharing mps=2", "--mig mixed", `"using --mig-strategy=mixed is not supported with MPS"`, citeValidateFlags}},
		{"MPS on one pool under --mig mixed is refused: the strategy is the whole cluster's",
			detection("gke", twoPools), nil, Options{Sharing: []string{"time-slicing=2", "l4=mps=4"}, MIG: []string{"mixed"}},
			[]string{"--sharing l4=mps=4", `"using --mig-strategy=mixed is not supported with MPS"`, citeValidateFlags}},
		{"mig.strategy mixed from --set is the same as --mig mixed",
			detection("gke", twoPools), nil, Options{Sharing: []string{"mps=2"}, Set: map[string]any{"mig": map[string]any{"strategy": "mixed"}}},
			[]string{"--set mig.strategy=mixed", "not supported with MPS", citeValidateFlags}},
		{"mig.strategy mixed from a values file",
			detection("gke", twoPools), nil, Options{Sharing: []string{"a100=mps=2"}, Files: []Layer{{Source: "mig.yaml", Values: map[string]any{"mig": map[string]any{"strategy": "mixed"}}}}},
			[]string{"file mig.yaml", "--sharing a100=mps=2", "not supported with MPS"}},
		{"an MPS config of the user's own under --mig mixed",
			detection("gke", twoPools), nil, Options{Files: ownPluginConfig("shared", mpsDoc), MIG: []string{"mixed"}},
			[]string{"devicePlugin.config.data.shared", "file mine.yaml", "--mig mixed", "not supported with MPS", citeValidateFlags}},
		{"MIG_STRATEGY=mixed in the device plugin's env wins over the ClusterPolicy's strategy",
			detection("gke", twoPools), nil, Options{Sharing: []string{"mps=2"}, Set: pluginEnv("MIG_STRATEGY", "mixed")},
			[]string{"devicePlugin.env MIG_STRATEGY=mixed", "not supported with MPS"}},
		{"one time-sliced replica is a config the plugin cannot read",
			detection("gke", twoPools), nil, Options{Sharing: []string{"time-slicing=1"}},
			[]string{"--sharing time-slicing=1", "number of replicas must be >= 2", "api/config/v1/replicas.go"}},
		{"a config of the user's own without resources",
			detection("gke", twoPools), nil, Options{Files: ownPluginConfig("empty", "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n")},
			[]string{"devicePlugin.config.data.empty", "no resources specified", citeConfig}},
		{"a config of another version",
			detection("gke", twoPools), nil, Options{Files: ownPluginConfig("v2", "version: v2\n")},
			[]string{"devicePlugin.config.data.v2", `"unknown version: v2"`, citeConfig}},
		{"a config that shares a resource name Kubernetes does not take",
			detection("gke", twoPools), nil, Options{Files: ownPluginConfig("bad-name", strings.Replace(tsDoc, "nvidia.com/gpu", "nvidia.com/GPU_big", 1))},
			[]string{"incorrect format for resource name", citeConfig}},
		{"a default config the ConfigMap does not have",
			detection("gke", twoPools), nil, Options{Files: ownPluginConfig("ts", tsDoc), Set: map[string]any{"devicePlugin": map[string]any{"config": map[string]any{"default": "t5"}}}},
			[]string{"devicePlugin.config.default t5 (--set)", `"specified config  does not exist"`, "NVIDIA/k8s-device-plugin cmd/config-manager/main.go, updateConfigName, v0.19.0"}},
		{"more MPS replicas than an MPS server takes",
			detection("gke", twoPools), nil, Options{Sharing: []string{"a100=mps=49"}},
			[]string{"--sharing a100=mps=49", `"invalid MPS configuration: invalid device maximum allowed replicas exceeded: 49 > 48"`, citeMPSDaemon}},
		{"a MIG strategy the plugin does not know",
			detection("gke", twoPools), nil, Options{Set: map[string]any{"mig": map[string]any{"strategy": "mixd"}}},
			[]string{"--set mig.strategy=mixd", `"unknown MIG strategy: mixd"`, citeValidateFlags}},
		{"a device ID strategy the plugin does not know",
			detection("gke", twoPools), nil, Options{Set: pluginEnv("DEVICE_ID_STRATEGY", "serial")},
			[]string{"devicePlugin.env DEVICE_ID_STRATEGY=serial", `"invalid --device-id-strategy option: serial"`, citeValidateFlags}},
		{"a device list strategy the plugin does not know",
			detection("gke", twoPools), nil, Options{Set: pluginEnv("DEVICE_LIST_STRATEGY", "envvar,mounts")},
			[]string{"devicePlugin.env DEVICE_LIST_STRATEGY=envvar,mounts", `"invalid --device-list-strategy option: invalid strategy: mounts"`, citeValidateFlags}},
		{"a device discovery strategy in a config file",
			detection("gke", twoPools), nil, Options{Files: ownPluginConfig("cuda", "version: v1\nflags:\n  deviceDiscoveryStrategy: cuda\n")},
			[]string{"devicePlugin.config.data.cuda", `"invalid --device-discovery-strategy option cuda"`, citeValidateFlags}},
		{"IMEX channels other than [0] in a config file",
			detection("gke", twoPools), nil, Options{Files: ownPluginConfig("imex", "version: v1\nimex:\n  channelIDs: [1, 2]\n")},
			[]string{"devicePlugin.config.data.imex", "channelIDs must be [] or [0]", citeValidateFlags}},
		{"GPUDirect Storage with precompiled NVIDIADrivers",
			detection("kubeadm"), threeNodes(), precompiled,
			[]string{"--precompiled auto", "gds.enabled=true", `"GPUDirect Storage driver (nvidia-fs) and/or GDRCopy driver is not supported along with pre-compiled NVIDIA drivers"`,
				"NVIDIA/gpu-operator controllers/nvidiadriver_controller.go, (*NVIDIADriverReconciler).Reconcile, v26.7.0"}},
		{"GDRCopy with the ClusterPolicy's precompiled driver",
			detection("kubeadm"), nil, Options{Set: map[string]any{"driver": map[string]any{"usePrecompiled": true}, "gdrcopy": map[string]any{"enabled": true}}},
			[]string{"driver.usePrecompiled=true", "gdrcopy.enabled=true", `"GDRCopy is not supported along with pre-compiled NVIDIA drivers"`,
				"NVIDIA/gpu-operator controllers/object_controls.go, transformGDRCopyContainer, v26.7.0"}},
		{"--dra on Kubernetes 1.34.1",
			detection("kubeadm", withKubernetes("v1.34.1")), nil, Options{DRA: true},
			[]string{"--dra", "v1.34.1", `"Kubernetes v1.34.2 or later is required"`, citeDRADocs}},
		{"--dra on a provider's 1.34.1 build",
			detection("kubeadm", withKubernetes("v1.34.1-eks-3025e55")), nil, Options{DRA: true},
			[]string{"--dra", "v1.34.1-eks-3025e55", "Kubernetes v1.34.2 or later is required", citeDRADocs}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Build(Input{Detection: tt.det, Profile: fakeProfiles, Charts: testCharts, Precompiled: tt.facts, Options: tt.opts})
			if err == nil {
				t.Fatalf("planned (%d steps), want a refusal naming %q", len(p.Steps), tt.want)
			}
			if !errors.Is(err, ErrInput) {
				t.Errorf("err = %v, want an ErrInput (exit 2)", err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("refusal %q is not one line", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("refusal %q\ndoes not say %q", msg, w)
				}
			}
		})
	}
}

func TestComponentsTakeWhatIsPlanned(t *testing.T) {
	tests := []struct {
		name  string
		det   *detect.Result
		facts *PrecompiledFacts
		opts  Options
	}{
		{"MPS under the chart's single strategy", detection("gke", twoPools), nil, Options{Sharing: []string{"mps=2"}}},
		{"MPS on one pool beside MIG single on another", detection("gke", migPools), nil, Options{Sharing: []string{"l4=mps=4"}, MIG: []string{"a100=all-1g.5gb"}}},
		{"time-slicing under --mig mixed", detection("gke", twoPools), nil, Options{Sharing: []string{"time-slicing=4"}, MIG: []string{"mixed"}}},
		{"MPS at the most an MPS server takes", detection("gke", twoPools), nil, Options{Sharing: []string{"mps=48"}}},
		{"a time-sliced config of the user's own under mixed", detection("gke", twoPools), nil, Options{Files: ownPluginConfig("ts", tsDoc), MIG: []string{"mixed"}}},
		{"an MPS config of the user's own whose migStrategy mixed the ClusterPolicy's single overrides", detection("gke", twoPools), nil,
			Options{Files: ownPluginConfig("shared", "version: v1\nflags:\n  migStrategy: mixed\n"+mpsDoc[len("version: v1\n"):])}},
		{"the device plugin's own values, valid", detection("gke", twoPools), nil, Options{Set: pluginEnv("DEVICE_LIST_STRATEGY", "envvar,cdi-annotations")}},
		{"a config that does not exist here is not judged (create: false)", detection("gke", twoPools), nil,
			Options{Set: map[string]any{"devicePlugin": map[string]any{"config": map[string]any{"name": "elsewhere", "default": "x"}}}}},
		{"precompiled drivers without GDS or GDRCopy", detection("kubeadm"), threeNodes(), Options{Precompiled: PrecompiledAuto}},
		{"GPUDirect Storage with a driver built on the node", detection("kubeadm"), nil, Options{Set: map[string]any{"gds": map[string]any{"enabled": true}}}},
		{"--dra on Kubernetes 1.34.2", detection("kubeadm", withKubernetes("v1.34.2")), nil, Options{DRA: true}},
		{"--dra on a provider's 1.34.2 build", detection("kubeadm", withKubernetes("v1.34.2-gke.1117000")), nil, Options{DRA: true}},
		{"--dra on k3s 1.35", detection("kubeadm", withKubernetes("v1.35.0+k3s1")), nil, Options{DRA: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Build(Input{Detection: tt.det, Profile: fakeProfiles, Charts: testCharts, Precompiled: tt.facts, Options: tt.opts})
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if p.Step("release-"+OperatorRelease) == nil {
				t.Errorf("steps %v: no operator release", stepIDs(p))
			}
		})
	}
}

// TestSharingMIGInputs: MPS under the mixed strategy is refused from the flags alone, in the plugin's
// words; other combinations pass to the plan.
func TestSharingMIGInputs(t *testing.T) {
	for _, tc := range []struct {
		sharing, mig []string
		want         string
	}{
		{[]string{"mps=2"}, []string{"mixed"}, "using --mig-strategy=mixed is not supported with MPS"},
		{[]string{"a100=mps=4"}, []string{"mixed", "a100=all-1g.10gb"}, "--sharing a100=mps=4 with --mig mixed"},
		{[]string{"time-slicing=4"}, []string{"mixed"}, ""},
		{[]string{"mps=2"}, []string{"single"}, ""},
		{[]string{"mps=2"}, nil, ""},
	} {
		err := CheckSharingMIGInputs(tc.sharing, tc.mig)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v %v: %v, want no refusal", tc.sharing, tc.mig, err)
		case tc.want != "" && (!errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "validateFlags")):
			t.Errorf("%v %v: %v, want ErrInput naming %q and citing validateFlags", tc.sharing, tc.mig, err, tc.want)
		}
	}
}
