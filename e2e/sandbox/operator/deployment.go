package operator

import (
	"os"
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuctl/gpuctl/internal/bundle"
)

// isGPUOperatorDeployment recognises the operator by its label (NVIDIA's chart and ours set
// app: gpu-operator — NVIDIA/gpu-operator deployments/gpu-operator/templates/operator.yaml@v26.7.0) or by its image (nvcr.io/nvidia/gpu-operator), whatever the
// namespace or release name.
func IsGPUOperatorDeployment(d *appsv1.Deployment) bool {
	if d.Labels["app"] == "gpu-operator" || d.Spec.Template.Labels["app"] == "gpu-operator" {
		return true
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if imageName(c.Image) == "gpu-operator" {
			return true
		}
	}
	return false
}

// imageName is the last path element of an image reference without tag or digest.
func imageName(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	name := path.Base(image)
	if i := strings.Index(name, ":"); i >= 0 {
		name = name[:i]
	}
	return name
}

// imageRelease is the GPU Operator release an operator image's tag names, if it is one of gpuctl's
// catalog ("nvcr.io/nvidia/gpu-operator:v26.7.0" → "v26.7.0"). A digest names none.
func ImageRelease(image string) (string, bool) {
	if strings.Contains(image, "@") {
		return "", false
	}
	name := path.Base(image)
	_, tag, ok := strings.Cut(name, ":")
	if !ok || tag == "" {
		return "", false
	}
	b, err := bundle.Get(tag)
	if err != nil {
		return "", false
	}
	return b.Version, true
}

// operatorContainer is the Deployment's operator container: the one named gpu-operator, else the
// first one.
func Container(d *appsv1.Deployment) corev1.Container {
	containers := d.Spec.Template.Spec.Containers
	if len(containers) == 0 {
		return corev1.Container{}
	}
	for _, c := range containers {
		if c.Name == "gpu-operator" {
			return c
		}
	}
	return containers[0]
}

// operatorEnv is the machine's environment plus the literal environment of the Deployment's
// operator container (DRIVER_MANAGER_IMAGE, VALIDATOR_IMAGE, … — the operator falls back to these
// for images a ClusterPolicy leaves unset, imagePath() in NVIDIA/gpu-operator api/nvidia/v1/clusterpolicy_types.go@v26.7.0). References to the pod's namespace resolve to
// the Deployment's namespace; other references are left out (the sandbox has no pod to resolve them in).
func Env(d *appsv1.Deployment) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "OPERATOR_NAMESPACE=") {
			env = append(env, kv)
		}
	}
	for _, e := range Container(d).Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, e.Name+"="+d.Namespace)
		}
	}
	return env
}
