package health

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

// OperandsRolledOut waits until every DaemonSet in namespace that a ClusterPolicy, NVIDIADriver or
// GPUCluster owns (the operator's operands) has rolled out its current spec on every node it should
// run on: the checks of `kubectl rollout status daemonset`. After an upgrade the validators of the old
// release stay Ready until their DaemonSet is replaced, so "validated" means something only once this
// holds. A DaemonSet being deleted does not count: after a switch between the device-plugin and the
// DRA stack the old stack's operands go, and the new one's must roll out. Progress reads "5/7 operand
// DaemonSets rolled out", Pending the others.
func (w *Waiter) OperandsRolledOut(ctx context.Context, namespace string) error {
	dss := w.Kube.AppsV1().DaemonSets(namespace)
	src := newSource("operand daemonsets", w.Kube, &appsv1.DaemonSet{},
		withSelectors("", "", asObject(dss.List)), withSelectors("", "", dss.Watch))
	return w.until(ctx, waitSpec{
		what:      "operand DaemonSets in " + namespace,
		sources:   []*source{src},
		namespace: func() string { return namespace },
		eval: func(time.Time) verdict {
			var total int
			var pending []string
			for _, o := range src.objects() {
				d, ok := o.(*appsv1.DaemonSet)
				if !ok || !operandOwned(d) || d.DeletionTimestamp != nil {
					continue
				}
				total++
				if !daemonSetRolledOut(d) {
					pending = append(pending, d.Name)
				}
			}
			slices.Sort(pending)
			done := total - len(pending)
			return verdict{
				progress: Progress{Done: done, Total: total, Pending: pending,
					Message: fmt.Sprintf("%d/%d operand DaemonSets rolled out", done, total)},
				done: total > 0 && len(pending) == 0,
			}
		},
	})
}

// operandOwned: the operator sets its custom resource as the controller of each operand DaemonSet,
// the ClusterPolicy's and NVIDIADriver's (controllers/object_controls.go) and the GPUCluster's
// (internal/state/state_skel.go, syncObjects) alike (NVIDIA/gpu-operator v26.7.0).
func operandOwned(d *appsv1.DaemonSet) bool {
	for _, r := range d.OwnerReferences {
		if strings.HasPrefix(r.APIVersion, "nvidia.com/") && (r.Kind == "ClusterPolicy" || r.Kind == "NVIDIADriver" || r.Kind == "GPUCluster") {
			return true
		}
	}
	return false
}

// daemonSetRolledOut: the controller observed the latest spec and every scheduled pod is updated and
// available (kubectl's rollout status for the RollingUpdate and OnDelete strategies alike).
func daemonSetRolledOut(d *appsv1.DaemonSet) bool {
	s := d.Status
	return s.ObservedGeneration >= d.Generation &&
		s.UpdatedNumberScheduled >= s.DesiredNumberScheduled &&
		s.NumberAvailable >= s.DesiredNumberScheduled
}
