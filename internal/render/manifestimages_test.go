package render

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/detect"
)

// TestManifestImagesOfNVIDIADrivers: --precompiled auto's NVIDIADrivers on v26.7. The kernel's
// precompiled one lists the image of each node it selects; the default, compiled, drives the rest and
// lists the driver per OS tag; the ClusterPolicy, which handed the driver over, lists none.
func TestManifestImagesOfNVIDIADrivers(t *testing.T) {
	manifest := `apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata:
  name: cluster-policy
spec:
  driver: {enabled: true, useNvidiaDriverCRD: true, repository: r.io, image: driver, version: "595.91.07"}
  toolkit: {enabled: false}
  devicePlugin: {enabled: false}
  dcgm: {enabled: false}
  dcgmExporter: {enabled: false}
  gfd: {enabled: false}
  migManager: {enabled: false}
  validator: {repository: r.io, image: gpu-operator-validator, version: v26.7.0}
---
apiVersion: nvidia.com/v1alpha1
kind: NVIDIADriver
metadata:
  name: default
spec: {default: true, usePrecompiled: false, repository: r.io, image: driver, version: "595.91.07"}
---
apiVersion: nvidia.com/v1alpha1
kind: NVIDIADriver
metadata:
  name: kernel-6.8.0-60-generic
spec:
  default: false
  usePrecompiled: true
  repository: r.io
  image: driver
  version: "595"
  nodeSelector: {feature.node.kubernetes.io/kernel-version.full: 6.8.0-60-generic}
`
	nodes := []detect.GPUNode{
		{Name: "gpu-1", Kernel: "6.8.0-60-generic", OSImage: "Ubuntu 24.04.2 LTS"},
		{Name: "gpu-3", Kernel: "6.8.0-1017-aws", OSImage: "Ubuntu 24.04.2 LTS"},
	}
	list, err := ManifestImages(manifest, "v26.7.0", []string{"ubuntu24.04"}, nodes)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, im := range list.Images {
		got[im.Image] = strings.Join(im.UsedBy, "; ")
	}
	want := map[string]string{
		"r.io/driver:595-6.8.0-60-generic-ubuntu24.04": "NVIDIADriver kernel-6.8.0-60-generic: driver (precompiled, kernel 6.8.0-60-generic)",
		"r.io/driver:595.91.07-ubuntu24.04":            "NVIDIADriver default: driver (ubuntu24.04)",
		"r.io/gpu-operator-validator:v26.7.0":          "ClusterPolicy cluster-policy: validator",
	}
	for img, by := range want {
		if got[img] != by {
			t.Errorf("%s used by %q, want %q (all: %v)", img, got[img], by, got)
		}
	}
	if len(got) != len(want) || slices.ContainsFunc(list.Notes, func(n string) bool { return strings.Contains(n, "precompiled") }) {
		t.Errorf("images %v, notes %q", got, list.Notes)
	}
}
