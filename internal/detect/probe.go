package detect

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	utilptr "k8s.io/utils/ptr"
)

// ProbeNamespace is where the toleration probe's pod is dry-run created: every cluster has it.
const ProbeNamespace = metav1.NamespaceDefault

// ProbeLabel marks the probe's pod. gpuctl's own MutatingAdmissionPolicy (charts/gpu-operator) leaves
// pods with this label alone, so the probe tells whether something else (the ExtendedResourceToleration
// admission plugin) adds the toleration, and a second run decides as the first did.
const ProbeLabel = "gpuctl.io/toleration-probe"

// ProbeGPUToleration asks the API server whether it adds a toleration of the GPU taint to a pod that
// requests nvidia.com/gpu and has none, by creating such a pod with dryRun=All: admission runs in full,
// nothing is stored, no pod runs. With the ExtendedResourceToleration admission plugin on, the pod comes
// back with {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
// (kubernetes/kubernetes plugin/pkg/admission/extendedresourcetoleration/admission.go@v1.37.2).
//
// The pod is written as a tutorial writes a GPU pod (resources.limits nvidia.com/gpu: 1) and complies
// with Pod Security's restricted level, so a namespace that enforces it admits it. The caller needs
// permission to create pods in ProbeNamespace. set, when not nil, changes the pod before it is sent (the
// engine's wait uses the probe label's absence to see gpuctl's own policy at work).
func ProbeGPUToleration(ctx context.Context, kube kubernetes.Interface, set ...func(*corev1.Pod)) (bool, error) {
	pod := probePod()
	for _, f := range set {
		f(pod)
	}
	out, err := kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return false, fmt.Errorf("dry-run create pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return toleratesGPUTaint(out.Spec.Tolerations), nil
}

func probePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ProbeNamespace, Name: "gpuctl-toleration-probe",
			Labels: map[string]string{ProbeLabel: "true", "app.kubernetes.io/part-of": "gpuctl"}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: utilptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   utilptr.To(true),
				RunAsUser:      utilptr.To[int64](65534),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:  "probe",
				Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{GPUResource: resource.MustParse("1")},
				},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: utilptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}
