package health

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// DeploymentAvailable waits until the Deployment's rollout is complete and it is Available: the controller has
// observed the latest spec, every replica is updated, no old replica is left, the updated ones are available,
// and the Available condition is True. These are the checks of `kubectl rollout status` plus the condition.
// Progress reads "0/1 replicas available". It fails early when the Deployment exceeds its progress deadline.
func (w *Waiter) DeploymentAvailable(ctx context.Context, namespace, name string) error {
	deployments := w.Kube.AppsV1().Deployments(namespace)
	field := fields.OneTermEqualSelector("metadata.name", name).String()
	src := newSource("deployments", w.Kube, &appsv1.Deployment{},
		withSelectors("", field, asObject(deployments.List)),
		withSelectors("", field, deployments.Watch))
	return w.until(ctx, waitSpec{
		what:      fmt.Sprintf("deployment %s/%s", namespace, name),
		sources:   []*source{src},
		namespace: func() string { return namespace },
		eval: func(time.Time) verdict {
			for _, o := range src.objects() {
				if d, ok := o.(*appsv1.Deployment); ok && d.Name == name {
					return deploymentVerdict(d)
				}
			}
			return verdict{progress: Progress{Message: "waiting for the deployment to be created"}}
		},
	})
}

func deploymentVerdict(d *appsv1.Deployment) verdict {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	p := Progress{Done: int(min(s.AvailableReplicas, want)), Total: int(want)}
	p.Message = fmt.Sprintf("%d/%d replicas available", p.Done, p.Total)
	v := verdict{progress: p}

	for _, c := range s.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			v.fail = fmt.Errorf("%w: %s", ErrRolloutStuck, c.Message)
			v.hint = "the pods did not become available in time; see the pods below"
			return v
		}
	}
	switch {
	case s.ObservedGeneration < d.Generation:
		v.progress.Message = "waiting for the deployment controller to observe the new spec"
	case s.UpdatedReplicas < want:
		v.progress.Message = fmt.Sprintf("%d/%d replicas updated", s.UpdatedReplicas, want)
	case s.Replicas > s.UpdatedReplicas:
		v.progress.Message = fmt.Sprintf("%d old replicas terminating", s.Replicas-s.UpdatedReplicas)
	case s.AvailableReplicas < s.UpdatedReplicas:
		// the default message says how many are available
	case !deploymentAvailable(d):
		v.progress.Message = "waiting for the Available condition"
	default:
		v.done = true
	}
	return v
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
