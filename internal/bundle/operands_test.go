package bundle

import (
	"slices"
	"strings"
	"testing"
)

func TestNVIDIADriverImages(t *testing.T) {
	nodes := []Node{{"gpu-1", "6.8.0-60-generic", "ubuntu24.04"}}
	manager := map[string]any{"repository": "r.io", "image": "k8s-driver-manager", "version": "v1"}
	for _, tc := range []struct {
		name string
		spec map[string]any
		want []string
	}{
		{"compiled: the driver per OS tag, and its manager", map[string]any{"repository": "r.io", "image": "driver", "version": "595.1", "manager": manager},
			[]string{"r.io/driver:595.1-rhel9", "r.io/driver:595.1-ubuntu24.04", "r.io/k8s-driver-manager:v1"}},
		{"precompiled: per kernel of the nodes it drives", map[string]any{"repository": "r.io", "image": "driver", "version": "595", "usePrecompiled": true, "manager": manager},
			[]string{"r.io/driver:595-6.8.0-60-generic-ubuntu24.04", "r.io/k8s-driver-manager:v1"}},
		{"GDS where enabled", map[string]any{"repository": "r.io", "image": "driver", "version": "595.1",
			"gds": map[string]any{"enabled": true, "repository": "r.io", "image": "nvidia-fs", "version": "2.20"}, "gdrcopy": map[string]any{"enabled": false}},
			[]string{"r.io/driver:595.1-rhel9", "r.io/driver:595.1-ubuntu24.04", "r.io/nvidia-fs:2.20-rhel9", "r.io/nvidia-fs:2.20-ubuntu24.04"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, notes := NVIDIADriverImages(tc.spec, []string{"ubuntu24.04", "rhel9"}, nodes)
			var refs []string
			for _, g := range got {
				refs = append(refs, g.Image)
			}
			slices.Sort(refs)
			if !slices.Equal(refs, tc.want) || len(notes) > 0 {
				t.Errorf("images %q (notes %q), want %q", refs, notes, tc.want)
			}
		})
	}
}

func TestOperandImages(t *testing.T) {
	img := func(repo, image, version string) map[string]any {
		return map[string]any{"repository": repo, "image": image, "version": version}
	}
	with := func(m map[string]any, kv ...any) map[string]any {
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name, version string
		spec          map[string]any
		os            []string
		nodes         []Node
		want          []string
		note          string
	}{
		{name: "the driver image is listed once per node OS, with the OS appended to its tag", version: "v26.7.0",
			spec: map[string]any{"driver": img("r.io/nvidia", "driver", "595.1")}, os: []string{"ubuntu22.04", "rhel9"},
			want: []string{"r.io/nvidia/driver:595.1-rhel9", "r.io/nvidia/driver:595.1-ubuntu22.04"}},
		{name: "a digest is used as it is, with @ and no OS suffix", version: "v26.7.0",
			spec: map[string]any{"driver": img("r.io/nvidia", "driver", "sha256:abc")}, os: []string{"ubuntu22.04"},
			want: []string{"r.io/nvidia/driver@sha256:abc"}},
		{name: "a disabled driver takes its driver manager with it", version: "v26.7.0",
			spec: map[string]any{"driver": with(img("r.io", "driver", "1"), "enabled", false, "manager", img("r.io", "k8s-driver-manager", "v1"))},
			os:   []string{"ubuntu22.04"}},
		{name: "an enabled driver brings its driver manager", version: "v26.7.0",
			spec: map[string]any{"driver": with(img("r.io", "driver", "1"), "manager", img("r.io", "k8s-driver-manager", "v1"))},
			os:   []string{"ubuntu24.04"}, want: []string{"r.io/driver:1-ubuntu24.04", "r.io/k8s-driver-manager:v1"}},
		{name: "operands whose IsEnabled defaults to false are left out unless enabled", version: "v26.7.0",
			spec: map[string]any{"gds": img("r.io", "nvidia-fs", "2"), "nodeStatusExporter": img("r.io", "gpu-operator", "v26.7.0"), "toolkit": img("r.io", "container-toolkit", "v1")},
			want: []string{"r.io/container-toolkit:v1"}},
		{name: "sandbox operands need sandboxWorkloads.enabled", version: "v26.7.0",
			spec: map[string]any{"vgpuDeviceManager": with(img("r.io", "vgpu-device-manager", "v0.5"), "enabled", true)}},
		{name: "the KubeVirt device plugin runs in kubevirt mode (the default) since v26.3", version: "v26.7.0",
			spec: map[string]any{"sandboxWorkloads": map[string]any{"enabled": true},
				"sandboxDevicePlugin":     with(img("r.io", "kubevirt-gpu-device-plugin", "v1"), "enabled", true),
				"kataSandboxDevicePlugin": with(img("r.io", "nvidia-sandbox-device-plugin", "v2"), "enabled", true)},
			want: []string{"r.io/kubevirt-gpu-device-plugin:v1"}},
		{name: "v25.10.1 deploys the sandbox device plugin whatever the mode", version: "v25.10.1",
			spec: map[string]any{"sandboxWorkloads": map[string]any{"enabled": true, "mode": "kata"},
				"sandboxDevicePlugin": with(img("r.io", "kubevirt-gpu-device-plugin", "v1"), "enabled", true)},
			want: []string{"r.io/kubevirt-gpu-device-plugin:v1"}},
		{name: "an image with neither repository nor version is taken as it is (kbld)", version: "v26.7.0",
			spec: map[string]any{"devicePlugin": map[string]any{"image": "r.io/x/dp@sha256:1"}},
			want: []string{"r.io/x/dp@sha256:1"}},
		{name: "an operand with no image at all is not listed, with a note", version: "v26.7.0",
			spec: map[string]any{"devicePlugin": map[string]any{}}, note: "devicePlugin: no image"},
		{name: "precompiled drivers of unknown nodes are not listed: their tag carries each node's kernel", version: "v26.7.0",
			spec: map[string]any{"driver": with(img("r.io", "driver", "595"), "usePrecompiled", true)}, os: []string{"ubuntu22.04"},
			note: "driver: precompiled, the driver image tag is 595-<kernel version>-<os tag> per node"},
		{name: "precompiled drivers of known nodes: one image per kernel and OS", version: "v26.7.0",
			spec: map[string]any{"driver": with(img("r.io", "driver", "595"), "usePrecompiled", true)}, os: []string{"ubuntu24.04"},
			nodes: []Node{{"gpu-1", "6.8.0-60-generic", "ubuntu24.04"}, {"gpu-2", "6.8.0-60-generic", "ubuntu24.04"}, {"gpu-3", "6.8.0-1017-aws", "ubuntu24.04"}, {"gpu-9", "6.1.0", ""}},
			want:  []string{"r.io/driver:595-6.8.0-1017-aws-ubuntu24.04", "r.io/driver:595-6.8.0-60-generic-ubuntu24.04"},
			note:  "cannot tell the image of gpu-9"},
		{name: "a driver handed to NVIDIADrivers is theirs: the ClusterPolicy lists neither it nor its manager", version: "v26.7.0",
			spec: map[string]any{"driver": with(img("r.io", "driver", "595.1"), "useNvidiaDriverCRD", true, "manager", img("r.io", "k8s-driver-manager", "v1")),
				"toolkit": img("r.io", "container-toolkit", "v1")},
			os: []string{"ubuntu24.04"}, want: []string{"r.io/container-toolkit:v1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Every operand not in the spec defaults on where NVIDIA's does: disable them so each
			// case sees only what it sets.
			spec := map[string]any{}
			for _, op := range operands(tc.version) {
				if len(op.path) == 1 {
					spec[op.path[0]] = map[string]any{"enabled": false}
				}
			}
			for k, v := range tc.spec {
				spec[k] = v
			}
			got, notes := OperandImages(tc.version, spec, tc.os, tc.nodes)
			var refs []string
			for _, g := range got {
				refs = append(refs, g.Image)
			}
			slices.Sort(refs)
			if !slices.Equal(refs, tc.want) {
				t.Errorf("images %q, want %q", refs, tc.want)
			}
			if tc.note != "" && !strings.Contains(strings.Join(notes, "\n"), tc.note) {
				t.Errorf("notes %q lack %q", notes, tc.note)
			}
		})
	}
}
