package podrun

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodEnvResolvesTheDownwardAPI(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nfd-worker-abc", Namespace: "gpu-operator", UID: "u-1"}, Spec: corev1.PodSpec{NodeName: "gpu-0"}}
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	c := &corev1.Container{Env: []corev1.EnvVar{field("NODE_NAME", "spec.nodeName"), field("POD_NAME", "metadata.name"), field("POD_UID", "metadata.uid"), {Name: "X", Value: "y"}}}
	env := Env(p, c)
	for _, want := range []string{"NODE_NAME=gpu-0", "POD_NAME=nfd-worker-abc", "POD_UID=u-1", "X=y"} {
		if !slices.Contains(env, want) {
			t.Errorf("env lacks %s", want)
		}
	}
}
