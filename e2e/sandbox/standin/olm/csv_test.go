package olm

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestOLMDeploymentReadyIsOLMsCheck(t *testing.T) {
	d := func(replicas, current, updated, available int32, generation int64, cond corev1.ConditionStatus) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator", Generation: generation},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: current, UpdatedReplicas: updated, AvailableReplicas: available,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: cond}}}}
	}
	tests := []struct {
		name string
		d    *appsv1.Deployment
		want bool
	}{
		{"observed, up to date and Available", d(1, 1, 1, 1, 2, corev1.ConditionTrue), true},
		{"a spec not yet observed", d(1, 1, 1, 1, 3, corev1.ConditionTrue), false},
		{"an outdated replica left", d(1, 2, 1, 1, 2, corev1.ConditionTrue), false},
		{"the Available condition False", d(1, 1, 1, 1, 2, corev1.ConditionFalse), false},
		// OLM counts neither updated nor available replicas, where gpuctl's own rule does.
		{"Available with no replica available, as maxUnavailable allows", d(1, 1, 1, 0, 2, corev1.ConditionTrue), true},
		{"scaled to zero", d(0, 0, 0, 0, 2, corev1.ConditionTrue), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := olmDeploymentReady(tt.d); got != tt.want {
				t.Errorf("olmDeploymentReady() = %v, want %v", got, tt.want)
			}
		})
	}
}
