package bundle

import (
	"slices"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
)

func TestCatalogShape(t *testing.T) {
	all := List()

	t.Run("it offers v26.7.0, v26.3.3 and v25.10.1, newest first", func(t *testing.T) {
		var got []string
		for _, b := range all {
			got = append(got, b.Version)
		}
		want := []string{"v26.7.0", "v26.3.3", "v25.10.1"}
		if !slices.Equal(got, want) {
			t.Fatalf("versions = %v, want %v", got, want)
		}
		for i := 1; i < len(all); i++ {
			a, b := semver.MustParse(all[i-1].Version), semver.MustParse(all[i].Version)
			if !a.GreaterThan(b) {
				t.Errorf("%s is listed before %s", a.Original(), b.Original())
			}
		}
	})

	t.Run("exactly one release is the default, and it is v26.7.0", func(t *testing.T) {
		var defaults []string
		for _, b := range all {
			if b.Default {
				defaults = append(defaults, b.Version)
			}
		}
		if !slices.Equal(defaults, []string{"v26.7.0"}) {
			t.Fatalf("defaults = %v, want [v26.7.0]", defaults)
		}
		if got := Default().Version; got != "v26.7.0" {
			t.Errorf("Default().Version = %q, want v26.7.0", got)
		}
	})

	for _, b := range all {
		t.Run(b.Version+" has an image for every component the chart pins, each fully named", func(t *testing.T) {
			for _, c := range components() {
				img, ok := b.Images[c.key]
				if !ok {
					if c.key == "kataSandboxDevicePlugin" && b.Version == "v25.10.1" {
						continue // new in v26.3.0
					}
					if c.key == "draDriver" && b.Version != "v26.7.0" {
						continue // the GPUCluster's, new in v26.7.0
					}
					t.Errorf("no image for %s", c.key)
					continue
				}
				if img.Repository == "" || img.Image == "" || img.Version == "" {
					t.Errorf("%s = %+v, want repository, image and version", c.key, img)
				}
			}
			for key := range b.Images {
				if !slices.ContainsFunc(components(), func(c component) bool { return c.key == key }) {
					t.Errorf("image %q has no place in the chart values", key)
				}
			}
			if b.NFD.Repository == "" || b.NFD.Image == "" || b.NFD.Version == "" {
				t.Errorf("NFD = %+v, want repository, image and version", b.NFD)
			}
		})

		t.Run(b.Version+" runs its own operator, validator and node status exporter", func(t *testing.T) {
			want := Image{"nvcr.io/nvidia", "gpu-operator", b.Version}
			for _, key := range []string{"operator", "validator", "nodeStatusExporter"} {
				if got := b.Images[key]; got != want {
					t.Errorf("%s = %v, want %v", key, got, want)
				}
			}
		})

		t.Run(b.Version+" gives GFD the device plugin's image", func(t *testing.T) {
			if b.Images["gfd"] != b.Images["devicePlugin"] {
				t.Errorf("gfd = %v, devicePlugin = %v", b.Images["gfd"], b.Images["devicePlugin"])
			}
		})
	}

	t.Run("changing a returned bundle does not change the catalog", func(t *testing.T) {
		b := List()[0]
		b.Images["operator"] = Image{"example.com", "x", "y"}
		b.Notes[0] = "changed"
		again := List()[0]
		if again.Images["operator"].Repository != "nvcr.io/nvidia" || again.Notes[0] == "changed" {
			t.Errorf("the catalog kept a caller's change: %+v", again)
		}
	})
}

// TestImagesMatchTheResearchTable spot-checks the catalog against deployments/gpu-operator/values.yaml of
// NVIDIA/gpu-operator at each release tag, with the repository changes between releases (the VFIO manager, the
// -ubuntu20.04 tags).
func TestImagesMatchTheResearchTable(t *testing.T) {
	cases := []struct {
		release, component, want string
	}{
		{"v26.7.0", "operator", "nvcr.io/nvidia/gpu-operator:v26.7.0"},
		{"v26.7.0", "driver", "nvcr.io/nvidia/driver:595.91.07"},
		{"v26.7.0", "driverManager", "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0"},
		{"v26.7.0", "toolkit", "nvcr.io/nvidia/k8s/container-toolkit:v1.20.0"},
		{"v26.7.0", "devicePlugin", "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"},
		{"v26.7.0", "dcgmExporter", "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless"},
		{"v26.7.0", "dcgm", "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04"},
		{"v26.7.0", "migManager", "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0"},
		{"v26.7.0", "gds", "nvcr.io/nvidia/cloud-native/nvidia-fs:2.29.4"},
		{"v26.7.0", "gdrcopy", "nvcr.io/nvidia/cloud-native/gdrdrv:v2.6"},
		{"v26.7.0", "vgpuDeviceManager", "nvcr.io/nvidia/cloud-native/vgpu-device-manager:v0.5.0"},
		{"v26.7.0", "sandboxDevicePlugin", "nvcr.io/nvidia/kubevirt-gpu-device-plugin:v1.6.0"},
		{"v26.7.0", "kataSandboxDevicePlugin", "nvcr.io/nvidia/cloud-native/nvidia-sandbox-device-plugin:v0.0.5"},
		{"v26.7.0", "ccManager", "nvcr.io/nvidia/cloud-native/k8s-cc-manager:v0.4.3"},
		{"v26.7.0", "vfioManager", "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0"},

		{"v26.3.3", "validator", "nvcr.io/nvidia/gpu-operator:v26.3.3"},
		{"v26.3.3", "driver", "nvcr.io/nvidia/driver:580.126.20"},
		{"v26.3.3", "driverManager", "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.11.0"},
		{"v26.3.3", "toolkit", "nvcr.io/nvidia/k8s/container-toolkit:v1.19.1"},
		{"v26.3.3", "gfd", "nvcr.io/nvidia/k8s-device-plugin:v0.19.3"},
		{"v26.3.3", "dcgmExporter", "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless"},
		{"v26.3.3", "dcgm", "nvcr.io/nvidia/cloud-native/dcgm:4.5.2-1-ubuntu22.04"},
		{"v26.3.3", "migManager", "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.14.2"},
		{"v26.3.3", "gds", "nvcr.io/nvidia/cloud-native/nvidia-fs:2.27.3"},
		{"v26.3.3", "gdrcopy", "nvcr.io/nvidia/cloud-native/gdrdrv:v2.5.2"},
		{"v26.3.3", "vgpuDeviceManager", "nvcr.io/nvidia/cloud-native/vgpu-device-manager:v0.4.2"},
		{"v26.3.3", "sandboxDevicePlugin", "nvcr.io/nvidia/kubevirt-gpu-device-plugin:v1.5.0"},
		{"v26.3.3", "kataSandboxDevicePlugin", "nvcr.io/nvidia/cloud-native/nvidia-sandbox-device-plugin:v0.0.3"},
		{"v26.3.3", "ccManager", "nvcr.io/nvidia/cloud-native/k8s-cc-manager:v0.4.0"},
		{"v26.3.3", "vfioManager", "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.11.0"},

		{"v25.10.1", "operator", "nvcr.io/nvidia/gpu-operator:v25.10.1"},
		{"v25.10.1", "driver", "nvcr.io/nvidia/driver:580.105.08"},
		{"v25.10.1", "driverManager", "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.9.1"},
		{"v25.10.1", "toolkit", "nvcr.io/nvidia/k8s/container-toolkit:v1.18.1"},
		{"v25.10.1", "devicePlugin", "nvcr.io/nvidia/k8s-device-plugin:v0.18.1"},
		{"v25.10.1", "dcgmExporter", "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.2-4.7.0-distroless"},
		{"v25.10.1", "dcgm", "nvcr.io/nvidia/cloud-native/dcgm:4.4.2-1-ubuntu22.04"},
		{"v25.10.1", "migManager", "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.13.1"},
		{"v25.10.1", "gds", "nvcr.io/nvidia/cloud-native/nvidia-fs:2.26.6"},
		{"v25.10.1", "gdrcopy", "nvcr.io/nvidia/cloud-native/gdrdrv:v2.5.1"},
		{"v25.10.1", "vgpuDeviceManager", "nvcr.io/nvidia/cloud-native/vgpu-device-manager:v0.4.1"},
		{"v25.10.1", "sandboxDevicePlugin", "nvcr.io/nvidia/kubevirt-gpu-device-plugin:v1.4.0"},
		{"v25.10.1", "ccManager", "nvcr.io/nvidia/cloud-native/k8s-cc-manager:v0.1.1"},
		{"v25.10.1", "vfioManager", "nvcr.io/nvidia/cuda:13.0.1-base-ubi9"},
	}
	for _, tc := range cases {
		t.Run(tc.release+" pins "+tc.component+" to "+tc.want, func(t *testing.T) {
			b, err := Get(tc.release)
			if err != nil {
				t.Fatal(err)
			}
			img, ok := b.Images[tc.component]
			if !ok {
				t.Fatalf("no %s image", tc.component)
			}
			if got := img.String(); got != tc.want {
				t.Errorf("%s = %s, want %s", tc.component, got, tc.want)
			}
		})
	}

	t.Run("v25.10.1 ships no Kata sandbox device plugin", func(t *testing.T) {
		b, _ := Get("v25.10.1")
		if img, ok := b.Images["kataSandboxDevicePlugin"]; ok {
			t.Errorf("kataSandboxDevicePlugin = %v, want none", img)
		}
	})

	t.Run("no release from v25.10 on tags the toolkit or MIG manager -ubuntu20.04", func(t *testing.T) {
		for _, b := range List() {
			for _, key := range []string{"toolkit", "migManager"} {
				if v := b.Images[key].Version; strings.Contains(v, "ubuntu20.04") {
					t.Errorf("%s %s = %s", b.Version, key, v)
				}
			}
		}
	})

	nfd := map[string]string{
		"v26.7.0":  "registry.k8s.io/nfd/node-feature-discovery:v0.19.0",
		"v26.3.3":  "registry.k8s.io/nfd/node-feature-discovery:v0.18.3",
		"v25.10.1": "registry.k8s.io/nfd/node-feature-discovery:v0.18.2",
	}
	for release, want := range nfd {
		t.Run(release+" comes with NFD "+want, func(t *testing.T) {
			b, err := Get(release)
			if err != nil {
				t.Fatal(err)
			}
			if got := b.NFD.String(); got != want {
				t.Errorf("NFD = %s, want %s", got, want)
			}
		})
	}
}

func TestGet(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"a version with its v is found", "v26.7.0", "v26.7.0"},
		{"a version without its v is found", "26.7.0", "v26.7.0"},
		{"an older release without its v is found", "25.10.1", "v25.10.1"},
		{"a capital V and spaces are forgiven", " V26.3.3 ", "v26.3.3"},
		{"no version means the default", "", "v26.7.0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Get(tc.in)
			if err != nil {
				t.Fatalf("Get(%q): %v", tc.in, err)
			}
			if b.Version != tc.want {
				t.Errorf("Get(%q).Version = %q, want %q", tc.in, b.Version, tc.want)
			}
		})
	}

	for _, in := range []string{"26.3.0", "v26.7", "latest", "v24.9.2"} {
		t.Run("an unknown version "+in+" is an error that lists the available ones", func(t *testing.T) {
			_, err := Get(in)
			if err == nil {
				t.Fatalf("Get(%q) succeeded", in)
			}
			for _, v := range []string{in, "v26.7.0", "v26.3.3", "v25.10.1"} {
				if !strings.Contains(err.Error(), v) {
					t.Errorf("error %q does not mention %s", err, v)
				}
			}
		})
	}
}
