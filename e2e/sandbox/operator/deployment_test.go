package operator

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestImageReleaseReadsTheOperatorImageTag(t *testing.T) {
	for _, tt := range []struct {
		image, release string
		known          bool
	}{
		{"nvcr.io/nvidia/gpu-operator:v26.7.0", "v26.7.0", true},
		{"nvcr.io/nvidia/gpu-operator:v26.3.3", "v26.3.3", true},
		{"nvcr.io/nvidia/gpu-operator:v25.10.1", "v25.10.1", true},
		{"registry.example:5000/mirror/gpu-operator:26.3.3", "v26.3.3", true},
		{"nvcr.io/nvidia/gpu-operator:v25.3.4", "", false},
		{"nvcr.io/nvidia/gpu-operator:v26.7.0-ubi9", "", false},
		{"nvcr.io/nvidia/gpu-operator@sha256:" + strings.Repeat("ab", 32), "", false},
		{"nvcr.io/nvidia/gpu-operator:v26.7.0@sha256:" + strings.Repeat("ab", 32), "", false},
		{"registry.example:5000/gpu-operator", "", false},
		{"nvcr.io/nvidia/gpu-operator:", "", false},
	} {
		t.Run(tt.image, func(t *testing.T) {
			got, known := ImageRelease(tt.image)
			if got != tt.release || known != tt.known {
				t.Errorf("imageRelease = %q, %v; want %q, %v", got, known, tt.release, tt.known)
			}
		})
	}
}

func TestOperatorContainerIsTheOneNamedGPUOperator(t *testing.T) {
	d := &appsv1.Deployment{}
	d.Spec.Template.Spec.Containers = []corev1.Container{
		{Name: "kube-rbac-proxy", Image: "quay.io/brancz/kube-rbac-proxy:v0.18.0"},
		{Name: "gpu-operator", Image: "nvcr.io/nvidia/gpu-operator:v26.3.3"},
	}
	if got := Container(d).Image; got != "nvcr.io/nvidia/gpu-operator:v26.3.3" {
		t.Errorf("operator container image %q", got)
	}
}
