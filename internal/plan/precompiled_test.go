package plan

import (
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"
)

// threeNodes: two nodes on the generic kernel, whose image the registry has, and one on the AWS
// kernel, whose image it has not.
func threeNodes() *PrecompiledFacts {
	return &PrecompiledFacts{Repository: "registry.example/nvidia/driver", Branch: "595", Kernels: []KernelImage{
		{Kernel: "6.8.0-60-generic", OSImage: "Ubuntu 24.04.2 LTS", Nodes: []string{"gpu-b", "gpu-a"}, Tag: "595-6.8.0-60-generic-ubuntu24.04", Published: true},
		{Kernel: "6.8.0-1017-aws", OSImage: "Ubuntu 24.04.2 LTS", Nodes: []string{"gpu-c"}, Tag: "595-6.8.0-1017-aws-ubuntu24.04"},
	}}
}

func TestPrecompiledAuto(t *testing.T) {
	v2633 := map[string]ChartInfo{NFDRelease: testCharts[NFDRelease], OperatorRelease: {Name: "gpu-operator", Version: "26.3.3", AppVersion: "v26.3.3"}}
	tests := []struct {
		name          string
		charts        map[string]ChartInfo
		facts         *PrecompiledFacts
		wantDrivers   []any
		wantDefault   bool
		wantNodes     map[string]string // node → driver
		wantPrecomp   []string
		wantWarning   string
		wantCompiledW string // why gpu-c is compiled
	}{
		{"v26.7: precompiled where the image is, the default NVIDIADriver builds the rest", testCharts, threeNodes(),
			[]any{map[string]any{"kernel": "6.8.0-60-generic", "usePrecompiled": true, "version": "595"}}, true,
			map[string]string{"gpu-a": "NVIDIADriver kernel-6.8.0-60-generic", "gpu-b": "NVIDIADriver kernel-6.8.0-60-generic", "gpu-c": "NVIDIADriver default"},
			[]string{"gpu-a", "gpu-b"}, "", "no registry.example/nvidia/driver:595-6.8.0-1017-aws-ubuntu24.04"},
		{"v26.3: no default NVIDIADriver, so each kernel gets its own", v2633, threeNodes(),
			[]any{map[string]any{"kernel": "6.8.0-1017-aws", "usePrecompiled": false}, map[string]any{"kernel": "6.8.0-60-generic", "usePrecompiled": true, "version": "595"}}, false,
			map[string]string{"gpu-a": "NVIDIADriver kernel-6.8.0-60-generic", "gpu-b": "NVIDIADriver kernel-6.8.0-60-generic", "gpu-c": "NVIDIADriver kernel-6.8.0-1017-aws"},
			[]string{"gpu-a", "gpu-b"}, "has no default NVIDIADriver", "no registry.example/nvidia/driver:595-6.8.0-1017-aws-ubuntu24.04"},
		{"a registry that did not answer: compiled everywhere, and a warning", testCharts,
			func() *PrecompiledFacts {
				f := threeNodes()
				f.Unknown = "cannot list the tags of registry.example/nvidia/driver"
				return f
			}(),
			[]any{}, true,
			map[string]string{"gpu-a": "NVIDIADriver default", "gpu-b": "NVIDIADriver default", "gpu-c": "NVIDIADriver default"},
			nil, "cannot list the tags", "cannot list the tags of registry.example/nvidia/driver"},
		{"an OS without precompiled images builds", testCharts, &PrecompiledFacts{Repository: "r/driver", Branch: "595", Kernels: []KernelImage{
			{Kernel: "5.14.0-427.13.1.el9_4.x86_64", OSImage: "Red Hat Enterprise Linux 9.4 (Plow)", Nodes: []string{"gpu-c"}}}},
			[]any{}, true, map[string]string{"gpu-c": "NVIDIADriver default"}, nil, "", "no precompiled image for Red Hat Enterprise Linux 9.4 (Plow) (NVIDIA publishes them for Ubuntu)"},
		{"no GPU node known: the default driver, compiled, for whatever joins", v2633, &PrecompiledFacts{Repository: "r/driver", Branch: "595"},
			[]any{}, true, map[string]string{}, nil, "no GPU node known yet", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Build(Input{Detection: detection("kubeadm"), Profile: fakeProfiles, Charts: tt.charts, Precompiled: tt.facts,
				Options: Options{Precompiled: PrecompiledAuto}})
			if err != nil {
				t.Fatal(err)
			}
			layer := operatorLayer(p, PrecompiledSource)
			if at(layer, "driver", "usePrecompiled") != false || at(layer, "driver", "nvidiaDriverCRD", "enabled") != true {
				t.Errorf("layer %v: want the driver compiled by default and handed to NVIDIADrivers", layer)
			}
			if got := at(layer, "driver", "nvidiaDriverCRD", "kernelDrivers"); !reflect.DeepEqual(got, tt.wantDrivers) {
				t.Errorf("kernelDrivers = %v, want %v", got, tt.wantDrivers)
			}
			if got := at(layer, "driver", "nvidiaDriverCRD", "deployDefaultCR"); got != tt.wantDefault {
				t.Errorf("deployDefaultCR = %v, want %v", got, tt.wantDefault)
			}
			nodes, precompiled := map[string]string{}, []string(nil)
			for _, d := range p.Drivers {
				nodes[d.Node] = d.Driver
				if d.Precompiled {
					precompiled = append(precompiled, d.Node)
					if !strings.HasPrefix(d.Image, "registry.example/nvidia/driver:595-6.8.0-60-generic") {
						t.Errorf("%s: image %q", d.Node, d.Image)
					}
				}
				if d.Node == "gpu-c" && d.Why != tt.wantCompiledW {
					t.Errorf("gpu-c is compiled because %q, want %q", d.Why, tt.wantCompiledW)
				}
			}
			if !maps.Equal(nodes, tt.wantNodes) || !reflect.DeepEqual(precompiled, tt.wantPrecomp) {
				t.Errorf("drivers %+v: want %v, precompiled on %v", p.Drivers, tt.wantNodes, tt.wantPrecomp)
			}
			if got := strings.Join(p.Warnings, "\n"); tt.wantWarning == "" && strings.Contains(got, PrecompiledSource) || !strings.Contains(got, tt.wantWarning) {
				t.Errorf("warnings %q, want %q", got, tt.wantWarning)
			}
		})
	}
}

func TestPrecompiledAutoRefusals(t *testing.T) {
	tests := []struct {
		name   string
		distro string
		o      Options
		want   string
	}{
		{"a value other than auto", "kubeadm", Options{Precompiled: "yes"}, "--precompiled yes: the one value is auto"},
		{"on OpenShift", "openshift", Options{Precompiled: PrecompiledAuto}, "on OpenShift the driver is built"},
		{"where the operator installs no driver (GKE)", "gke", Options{Precompiled: PrecompiledAuto}, "the operator installs no driver here (driver.enabled=false: the gke profile"},
		{"with --set driver.usePrecompiled", "kubeadm", Options{Precompiled: PrecompiledAuto, Set: map[string]any{"driver": map[string]any{"usePrecompiled": true}}},
			"--precompiled auto writes driver.usePrecompiled, and --set sets driver.usePrecompiled too"},
		{"with -f setting the NVIDIADriver's nodeSelector", "kubeadm", Options{Precompiled: PrecompiledAuto,
			Files: []Layer{{Source: "pools.yaml", Values: map[string]any{"driver": map[string]any{"nvidiaDriverCRD": map[string]any{"nodeSelector": map[string]any{"a": "b"}}}}}}},
			"file pools.yaml sets driver.nvidiaDriverCRD.nodeSelector too"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(Input{Detection: detection(tt.distro), Profile: fakeProfiles, Charts: testCharts, Precompiled: threeNodes(), Options: tt.o})
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want an input error saying %q", err, tt.want)
			}
		})
	}
}

func TestKernelDriverName(t *testing.T) {
	// charts/charts_test.go's TestKernelDriverNamesAreThePlans renders our chart for these shapes.
	for label, want := range map[string]string{
		"6.8.0-60-generic":             "kernel-6.8.0-60-generic",
		"5.14.0-427.13.1.el9_4.x86_64": "kernel-5.14.0-427.13.1.el9-4.x86-64",
		"6.1.0_DEBUG__1":               "kernel-6.1.0-debug-1",
		strings.Repeat("a", 60):        "kernel-" + strings.Repeat("a", 56),
	} {
		if got := KernelDriverName(label); got != want {
			t.Errorf("KernelDriverName(%q) = %q, want %q", label, got, want)
		}
	}
}
