package health

import (
	"context"
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func deployment(replicas, updated, available int32, availableCond corev1.ConditionStatus) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator", Namespace: "gpu-operator"},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas},
		Status: appsv1.DeploymentStatus{
			Replicas: updated, UpdatedReplicas: updated, AvailableReplicas: available, ReadyReplicas: available,
		},
	}
	if availableCond != "" {
		d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: availableCond}}
	}
	return d
}

func TestDeploymentAvailable(t *testing.T) {
	tests := []struct {
		name    string
		initial []*appsv1.Deployment
		// then is written after the first progress report; nil entries skip.
		then         *appsv1.Deployment
		wantMessages []string
		wantErr      error
	}{
		{
			name:         "the wait ends when the rollout completes and the Available condition turns True",
			initial:      []*appsv1.Deployment{deployment(1, 1, 0, corev1.ConditionFalse)},
			then:         deployment(1, 1, 1, corev1.ConditionTrue),
			wantMessages: []string{"0/1 replicas available", "1/1 replicas available"},
		},
		{
			name:         "the wait covers the deployment being created after it started",
			then:         deployment(1, 1, 1, corev1.ConditionTrue),
			wantMessages: []string{"waiting for the deployment to be created", "1/1 replicas available"},
		},
		{
			name:         "an already available deployment returns at once",
			initial:      []*appsv1.Deployment{deployment(2, 2, 2, corev1.ConditionTrue)},
			wantMessages: []string{"2/2 replicas available"},
		},
		{
			name: "a rollout past its progress deadline fails without waiting for the timeout",
			initial: []*appsv1.Deployment{func() *appsv1.Deployment {
				d := deployment(1, 1, 0, corev1.ConditionFalse)
				d.Status.Conditions = append(d.Status.Conditions, appsv1.DeploymentCondition{
					Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded",
					Message: `ReplicaSet "gpu-operator-5d4" has timed out progressing.`,
				})
				return d
			}()},
			wantMessages: []string{"0/1 replicas available"},
			wantErr:      ErrRolloutStuck,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientset()
			for _, d := range tt.initial {
				if _, err := c.AppsV1().Deployments(d.Namespace).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			rec := newRecorder()
			w := &Waiter{Kube: c, OnProgress: rec.on, DiagnoseTimeout: -1}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			errc := run(ctx, func(ctx context.Context) error { return w.DeploymentAvailable(ctx, "gpu-operator", "gpu-operator") })
			rec.waitForMessage(t, tt.wantMessages[0])
			if tt.then != nil {
				deployments := c.AppsV1().Deployments("gpu-operator")
				var err error
				if len(tt.initial) == 0 {
					_, err = deployments.Create(ctx, tt.then, metav1.CreateOptions{})
				} else {
					_, err = deployments.Update(ctx, tt.then, metav1.UpdateOptions{})
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			err := result(t, errc)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("DeploymentAvailable() = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				var stuck *StuckError
				if !errors.As(err, &stuck) {
					t.Fatalf("error %T is not a *StuckError", err)
				}
			}
			got := rec.messages()
			if last := got[len(got)-1]; last != tt.wantMessages[len(tt.wantMessages)-1] {
				t.Errorf("progress messages = %q, want them to end with %q", got, tt.wantMessages[len(tt.wantMessages)-1])
			}
		})
	}
}

func TestDeploymentVerdict(t *testing.T) {
	tests := []struct {
		name     string
		d        *appsv1.Deployment
		wantDone bool
		wantMsg  string
	}{
		{
			name: "a spec the controller has not observed yet is not done even if the status looks good",
			d: func() *appsv1.Deployment {
				d := deployment(1, 1, 1, corev1.ConditionTrue)
				d.Generation = 2
				d.Status.ObservedGeneration = 1
				return d
			}(),
			wantMsg: "waiting for the deployment controller to observe the new spec",
		},
		{
			name: "old replicas still running keep the rollout going",
			d: func() *appsv1.Deployment {
				d := deployment(1, 1, 1, corev1.ConditionTrue)
				d.Status.Replicas = 2
				return d
			}(),
			wantMsg: "1 old replicas terminating",
		},
		{
			name:    "fewer updated replicas than wanted is not done",
			d:       deployment(3, 1, 1, corev1.ConditionTrue),
			wantMsg: "1/3 replicas updated",
		},
		{
			name:    "available replicas without the Available condition is not done",
			d:       deployment(1, 1, 1, ""),
			wantMsg: "waiting for the Available condition",
		},
		{
			name:     "updated, available and Available is done",
			d:        deployment(1, 1, 1, corev1.ConditionTrue),
			wantDone: true,
			wantMsg:  "1/1 replicas available",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := deploymentVerdict(tt.d)
			if v.done != tt.wantDone || v.progress.Message != tt.wantMsg {
				t.Errorf("verdict = done %v %q, want done %v %q", v.done, v.progress.Message, tt.wantDone, tt.wantMsg)
			}
		})
	}
}

func TestDeploymentAvailableRule(t *testing.T) {
	tests := []struct {
		name    string
		d       *appsv1.Deployment
		want    bool
		wantWhy string
	}{
		{"every replica updated, available and the condition True", deployment(2, 2, 2, corev1.ConditionTrue), true, ""},
		{"replicas left unset mean one, as the API server defaults them", func() *appsv1.Deployment {
			d := deployment(1, 1, 1, corev1.ConditionTrue)
			d.Spec.Replicas = nil
			return d
		}(), true, ""},
		{"scaled to zero runs nothing, though Kubernetes calls it Available", deployment(0, 0, 0, corev1.ConditionTrue), false, "scaled to 0 replicas"},
		{"the condition True with no replica available (maxUnavailable allows it) is not available",
			deployment(1, 1, 0, corev1.ConditionTrue), false, "0/1 replicas available"},
		{"an old replica still serving mid-upgrade is not the new spec available", func() *appsv1.Deployment {
			d := deployment(1, 1, 1, corev1.ConditionTrue)
			d.Status.Replicas = 2
			return d
		}(), false, "1 old replicas terminating"},
		{"a spec the controller has not observed is not available", func() *appsv1.Deployment {
			d := deployment(1, 1, 1, corev1.ConditionTrue)
			d.Generation, d.Status.ObservedGeneration = 3, 2
			return d
		}(), false, "waiting for the deployment controller to observe the new spec"},
		{"available replicas with the condition False are not available", deployment(1, 1, 1, corev1.ConditionFalse), false, "waiting for the Available condition"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := DeploymentAvailable(tt.d)
			if got != tt.want || why != tt.wantWhy {
				t.Errorf("DeploymentAvailable() = %v %q, want %v %q", got, why, tt.want, tt.wantWhy)
			}
			if v := deploymentVerdict(tt.d); v.done != tt.want {
				t.Errorf("the wait's verdict done %v, want %v", v.done, tt.want)
			}
		})
	}
}
