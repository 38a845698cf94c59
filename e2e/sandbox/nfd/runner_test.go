package nfd

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestUpstreamImage(t *testing.T) {
	for _, tc := range []struct {
		image string
		want  bool
	}{
		{"registry.k8s.io/nfd/node-feature-discovery:v0.19.0", true},
		{"mirror.example.com:5000/nfd/node-feature-discovery:v0.19.0-minimal", true},
		{"registry.k8s.io/nfd/node-feature-discovery:v0.17.3", false},
		{"registry.redhat.io/openshift4/ose-node-feature-discovery-rhel9:v4.18", false},
		{"registry.k8s.io/nfd/node-feature-discovery", false},
	} {
		t.Run(tc.image, func(t *testing.T) {
			if got := upstreamImage(tc.image); got != tc.want {
				t.Errorf("upstreamImage(%q) = %v, want %v", tc.image, got, tc.want)
			}
		})
	}
}

func TestPodEnvResolvesTheDownwardAPI(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nfd-worker-abc", Namespace: "gpu-operator", UID: "u-1"}, Spec: corev1.PodSpec{NodeName: "gpu-0"}}
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	c := &corev1.Container{Env: []corev1.EnvVar{field("NODE_NAME", "spec.nodeName"), field("POD_NAME", "metadata.name"), field("POD_UID", "metadata.uid"), {Name: "X", Value: "y"}}}
	env := podEnv(p, c)
	for _, want := range []string{"NODE_NAME=gpu-0", "POD_NAME=nfd-worker-abc", "POD_UID=u-1", "X=y", "KUBERNETES_NAMESPACE=gpu-operator"} {
		if !slices.Contains(env, want) {
			t.Errorf("env lacks %s", want)
		}
	}
}
