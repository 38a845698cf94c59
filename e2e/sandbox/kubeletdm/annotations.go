package kubeletdm

import (
	"context"
	"encoding/json"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// What the Manager writes on a pod, for tests to see the plugin's answer. No kubelet writes these: a
// real one hands the answer to the container runtime.
const (
	// AnnotationPrefix starts the annotation that lists a pod's devices of one resource
	// (DevicesAnnotation).
	AnnotationPrefix = "sandbox.gpuctl.io/allocated-"
	// EnvsAnnotation holds the environment the plugins' answers give each container, as JSON:
	// container name → variable → value.
	EnvsAnnotation = "sandbox.gpuctl.io/allocated-envs"
	// CDIAnnotation holds the CDI devices and the annotations the plugins' answers give each
	// container (NVIDIA's plugin names a pod's devices there under its cdi-annotations and cdi-cri
	// strategies, which the GPU operator sets when CDI is on), as JSON: container name →
	// {"devices": [CDI device names], "annotations": {key: value}}.
	CDIAnnotation = "sandbox.gpuctl.io/allocated-cdi"
	// ErrorAnnotation holds why the pod's devices could not be allocated (the kubelet would reject
	// the pod with it); removed once they are.
	ErrorAnnotation = "sandbox.gpuctl.io/allocate-error"
	// annotationFieldManager is the field manager of those writes.
	annotationFieldManager = "sandbox-kubeletdm"
)

// DevicesAnnotation is the annotation listing, comma-separated in the order allocated, the device IDs
// of resource that the pod's containers got: AnnotationPrefix and the resource name with its "/"
// as "_" (an annotation key has one "/"), "sandbox.gpuctl.io/allocated-nvidia.com_gpu".
func DevicesAnnotation(resource string) string {
	return AnnotationPrefix + strings.ReplaceAll(resource, "/", "_")
}

// allocationAnnotations are the annotations for the pod's allocations; ErrorAnnotation is removed.
func allocationAnnotations(allocs []Allocation) (map[string]*string, error) {
	ids := map[string][]string{}
	seen := map[string]bool{}
	envs := map[string]map[string]string{}
	cdi := map[string]*cdiAnswer{}
	for _, a := range allocs {
		for _, id := range a.DeviceIDs {
			if !seen[a.Resource+"\x00"+id] { // an app container reusing an init container's device
				seen[a.Resource+"\x00"+id] = true
				ids[a.Resource] = append(ids[a.Resource], id)
			}
		}
		if envs[a.Container] == nil {
			envs[a.Container] = map[string]string{}
		}
		for k, v := range a.Response.GetEnvs() {
			envs[a.Container][k] = v
		}
		cdi[a.Container] = cdi[a.Container].add(a.Response)
	}
	out := map[string]*string{ErrorAnnotation: nil}
	for res, list := range ids {
		key := DevicesAnnotation(res)
		if len(validation.IsQualifiedName(key)) != 0 {
			continue // a resource name too long for an annotation key
		}
		v := strings.Join(list, ",")
		out[key] = &v
	}
	b, err := json.Marshal(envs)
	if err != nil {
		return nil, err
	}
	v := string(b)
	out[EnvsAnnotation] = &v
	if b, err = json.Marshal(cdi); err != nil {
		return nil, err
	}
	c := string(b)
	out[CDIAnnotation] = &c
	return out, nil
}

// cdiAnswer is what of Allocate's answers names CDI devices for one container.
type cdiAnswer struct {
	Devices     []string          `json:"devices"`
	Annotations map[string]string `json:"annotations"`
}

func (c *cdiAnswer) add(r *pluginapi.ContainerAllocateResponse) *cdiAnswer {
	if c == nil {
		c = &cdiAnswer{Devices: []string{}, Annotations: map[string]string{}}
	}
	for _, d := range r.GetCdiDevices() {
		c.Devices = append(c.Devices, d.GetName())
	}
	maps.Copy(c.Annotations, r.GetAnnotations())
	return c
}

// annotate writes the pod's allocations on it, once.
func (m *Manager) annotate(ctx context.Context, pod *corev1.Pod, s *podState) error {
	m.mu.Lock()
	done := s.annotated
	m.mu.Unlock()
	if done {
		return nil
	}
	want, err := allocationAnnotations(s.allocations)
	if err != nil {
		return err
	}
	if err := m.patchAnnotations(ctx, pod, want); err != nil {
		return err
	}
	m.mu.Lock()
	s.annotated = true
	m.mu.Unlock()
	return nil
}

// annotateError writes why the pod's devices could not be allocated, unless it says so already.
func (m *Manager) annotateError(ctx context.Context, pod *corev1.Pod, cause error) error {
	msg := cause.Error()
	if pod.Annotations[ErrorAnnotation] == msg {
		return nil
	}
	return m.patchAnnotations(ctx, pod, map[string]*string{ErrorAnnotation: &msg})
}

// patchAnnotations sets (or, for nil values, removes) the pod's annotations with a JSON merge patch
// of its metadata.
func (m *Manager) patchAnnotations(ctx context.Context, pod *corev1.Pod, annotations map[string]*string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	_, err = m.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: annotationFieldManager})
	return err
}
