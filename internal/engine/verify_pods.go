package engine

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/gpuctl/gpuctl/internal/plan"
)

// verifyLabels are the labels of a run's objects: a later run finds what this one left by them.
func verifyLabels(run string) map[string]string {
	return map[string]string{VerifyNameLabel: plan.VerifyName, managedByLabel: "gpuctl", VerifyRunLabel: run}
}

// verifyClaimName is the name of a verify pod's claim, as its pod and container refer to it.
const verifyClaimName = "gpu"

// verifyClaimTemplate is a run's ResourceClaimTemplate: one request for exactly one device of the
// class. Each pod naming it gets a claim of its own, which the scheduler allocates from the devices of
// the node the pod is pinned to.
func verifyClaimTemplate(p *plan.VerifyPlan, ct plan.VerifyClaimTemplate) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: ct.Name, Namespace: ct.Namespace, Labels: verifyLabels(p.RunID)},
		Spec: resourcev1.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: verifyLabels(p.RunID)},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name:    verifyClaimName,
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: ct.DeviceClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
			}}}},
		},
	}
}

// verifyPod is the workload for one node: pinned to it by node affinity (so the scheduler, not the
// pod, decides whether it fits, and says why when it does not), tolerating the GPU taint, one GPU: one
// unit of the resource the plan chose for the node, or a claim from the run's ResourceClaimTemplate.
func verifyPod(p *plan.VerifyPlan, pp plan.VerifyPod) *corev1.Pod {
	no := false
	grace := int64(5)
	var secrets []corev1.LocalObjectReference
	for _, s := range p.ImagePullSecrets {
		secrets = append(secrets, corev1.LocalObjectReference{Name: s})
	}
	var claims []corev1.PodResourceClaim
	res := corev1.ResourceRequirements{}
	switch {
	case pp.ClaimTemplate != "":
		tmpl := pp.ClaimTemplate
		claims = []corev1.PodResourceClaim{{Name: verifyClaimName, ResourceClaimTemplateName: &tmpl}}
		res.Claims = []corev1.ResourceClaim{{Name: verifyClaimName}}
	case pp.Resource != "":
		res.Limits = corev1.ResourceList{corev1.ResourceName(pp.Resource): resource.MustParse("1")}
	default:
		res.Limits = corev1.ResourceList{plan.VerifyGPUResource: resource.MustParse("1")}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        pp.Name,
			Namespace:   pp.Namespace,
			Labels:      verifyLabels(p.RunID),
			Annotations: map[string]string{verifyNodeAnno: pp.Node},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: &grace,
			ImagePullSecrets:              secrets,
			ResourceClaims:                claims,
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{pp.Node}}},
				}}},
			}},
			Tolerations: []corev1.Toleration{{Key: plan.TaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffect(plan.TaintEffect)}},
			Containers: []corev1.Container{{
				Name:      verifyContainer,
				Image:     pp.Image,
				Resources: res,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
			}},
		},
	}
}

// podTarget is a pod to delete: by name, only while it has this UID.
type podTarget struct {
	name string
	uid  types.UID
}

// deletePods deletes the targets, each with a UID precondition, and waits, with a watch on the pods
// sel selects, until they are gone; it returns the names it deleted. A target already gone, or
// replaced meanwhile by another pod of the same name, is not deleted: skipped says which and why.
func deletePods(ctx context.Context, client kubernetes.Interface, pods typedcorev1.PodInterface, sel string, targets []podTarget, skipped func(name, why string)) ([]string, error) {
	var names []string
	uids := map[types.UID]bool{}
	for _, t := range targets {
		uid := t.uid
		err := pods.Delete(ctx, t.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case apierrors.IsNotFound(err):
			skipped(t.name, "already gone")
			continue
		case apierrors.IsConflict(err):
			skipped(t.name, fmt.Sprintf("it is no longer the pod planned (uid %s): another was made under its name", t.uid))
			continue
		case err != nil:
			return names, fmt.Errorf("delete pod %s: %w", t.name, err)
		}
		names = append(names, t.name)
		uids[t.uid] = true
	}
	if len(names) == 0 {
		return nil, nil
	}
	if err := waitGone(ctx, client, pods, sel, uids); err != nil {
		return names, fmt.Errorf("wait for pods %s to go: %w", strings.Join(names, ", "), err)
	}
	return names, nil
}

// waitGone waits, with a watch on the pods sel selects, until none of them has one of uids.
func waitGone(ctx context.Context, client kubernetes.Interface, pods typedcorev1.PodInterface, sel string, uids map[types.UID]bool) error {
	gone := func(store cache.Store) bool {
		for _, o := range store.List() {
			if p, ok := o.(*corev1.Pod); ok && uids[p.UID] {
				return false
			}
		}
		return true
	}
	var store cache.Store
	_, err := watchtools.UntilWithSync(ctx, podListWatch(client, pods, sel), &corev1.Pod{}, func(s cache.Store) (bool, error) {
		store = s
		return gone(s), nil
	}, func(watch.Event) (bool, error) {
		// The store already reflects the event when the condition runs.
		return gone(store), nil
	})
	return err
}

// podListWatch lists and watches the pods sel selects. The reflector is told whether the client can
// do streaming lists (WatchListClient is on by default since client-go v0.35; the fakes cannot).
func podListWatch(client kubernetes.Interface, pods typedcorev1.PodInterface, sel string) cache.ListerWatcher {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return pods.Watch(ctx, o)
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, client)
}
