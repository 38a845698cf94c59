package health

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// DeploymentAvailable waits until the Deployment is available as the function DeploymentAvailable
// defines it: its current spec rolled out (the checks of `kubectl rollout status`), its Available
// condition True, and at least one replica wanted. Progress reads "0/1 replicas available". It fails
// early when the Deployment exceeds its progress deadline.
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

// deploymentVerdict is the wait's verdict on d: DeploymentAvailable's, with "x/y replicas available" as
// progress, failing early when the rollout exceeded its progress deadline.
func deploymentVerdict(d *appsv1.Deployment) verdict {
	want := desiredReplicas(d)
	p := Progress{Done: int(min(d.Status.AvailableReplicas, want)), Total: int(want)}
	p.Message = replicasAvailable(p.Done, p.Total)
	v := verdict{progress: p}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			v.fail = fmt.Errorf("%w: %s", ErrRolloutStuck, c.Message)
			v.hint = "the pods did not become available in time; see the pods below"
			return v
		}
	}
	v.done, v.progress.Message = DeploymentAvailable(d)
	if v.done {
		v.progress.Message = p.Message
	}
	return v
}

// DeploymentAvailable reports whether d runs its current spec and, when it does not, why, in a few
// words ("1/3 replicas updated"). It is gpuctl's one meaning of an available Deployment: install waits
// for it and `gpuctl status` reports it. All of these must hold:
//   - The deployment controller has observed the current spec (status.observedGeneration is at least
//     metadata.generation); until then the status describes an older spec.
//   - The rollout is complete, as `kubectl rollout status` judges it: every wanted replica is updated, no
//     old replica is left, and the updated ones are available (kubernetes/kubernetes
//     staging/src/k8s.io/kubectl/pkg/polymorphichelpers/rollout_status.go, DeploymentStatusViewer.Status,
//     v1.37). An upgrade's old pod still serving is not the new spec available.
//   - The Available condition is True: the controller's own verdict that at least spec.replicas minus
//     maxUnavailable replicas are available (kubernetes/kubernetes pkg/controller/deployment/sync.go,
//     syncRolloutStatus, v1.37). `kubectl wait --for=condition=Available` reads only this, and it alone is
//     True mid-rollout and with no replica available when maxUnavailable allows it.
//   - At least one replica is wanted: Kubernetes calls a Deployment scaled to zero Available and rolled
//     out, but it runs nothing, and the Deployments gpuctl waits for (the GPU Operator) must run.
//
// A rollout past its progress deadline is not available either; the wait fails on it at once.
func DeploymentAvailable(d *appsv1.Deployment) (bool, string) {
	want, s := desiredReplicas(d), d.Status
	switch {
	case s.ObservedGeneration < d.Generation:
		return false, "waiting for the deployment controller to observe the new spec"
	case want == 0:
		return false, "scaled to 0 replicas"
	case s.UpdatedReplicas < want:
		return false, fmt.Sprintf("%d/%d replicas updated", s.UpdatedReplicas, want)
	case s.Replicas > s.UpdatedReplicas:
		return false, fmt.Sprintf("%d old replicas terminating", s.Replicas-s.UpdatedReplicas)
	case s.AvailableReplicas < s.UpdatedReplicas:
		return false, replicasAvailable(int(min(s.AvailableReplicas, want)), int(want))
	case !availableCondition(d):
		return false, "waiting for the Available condition"
	}
	return true, ""
}

// desiredReplicas is spec.replicas, which the API server defaults to 1.
func desiredReplicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func replicasAvailable(done, total int) string {
	return fmt.Sprintf("%d/%d replicas available", done, total)
}

// availableCondition is true when the Deployment's Available condition is True.
func availableCondition(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
