package health

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GPUClusterResource is the GVR of the GPU Operator's GPUCluster, the DRA stack (nvidia.com/v1alpha1,
// new in v26.7.0).
func GPUClusterResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "nvidia.com", Version: "v1alpha1", Resource: "gpuclusters"}
}

// ErrGPUClusterBlocked: the operator reconciles no GPUCluster while a ClusterPolicy exists.
var ErrGPUClusterBlocked = errors.New("the GPUCluster is not reconciled because a ClusterPolicy exists")

// reasonPrerequisiteNotMet is the GPUCluster's Error reason while a ClusterPolicy exists
// (controllers/gpucluster_controller.go, validatePrerequisites, at v26.7.0).
const reasonPrerequisiteNotMet = "PrerequisiteNotMet"

// GPUClusterStatus is what a GPUCluster's status says: state ready, notReady or disabled, a Ready
// condition (True with reason Reconciled once every operand is ready), and on failure an Error
// condition True whose reason and message say why (internal/conditions/gpucluster.go at v26.7.0).
type GPUClusterStatus struct {
	State       string
	Namespace   string
	ReadyStatus string
	ReadyReason string
	// ErrorReason and ErrorMessage are the Error condition's, when it is True.
	ErrorReason, ErrorMessage string
}

// ReadGPUClusterStatus reads a GPUCluster's status.
func ReadGPUClusterStatus(u *unstructured.Unstructured) GPUClusterStatus {
	var st GPUClusterStatus
	st.State, _, _ = unstructured.NestedString(u.Object, "status", "state")
	st.Namespace, _, _ = unstructured.NestedString(u.Object, "status", "namespace")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		status, _ := m["status"].(string)
		reason, _ := m["reason"].(string)
		switch m["type"] {
		case conditionReady:
			st.ReadyStatus, st.ReadyReason = status, reason
		case "Error":
			if status == "True" {
				st.ErrorReason = reason
				st.ErrorMessage, _ = m["message"].(string)
			}
		}
	}
	return st
}

// Ready: state ready and the Ready condition True with reason Reconciled, as for the ClusterPolicy.
func (s GPUClusterStatus) Ready() bool {
	return s.State == policyStateReady && s.ReadyStatus == "True" && s.ReadyReason == reasonReconciled
}

// Describe is the status in one line: "state notReady (OperandNotReady: Waiting for operand pods to be ready)".
func (s GPUClusterStatus) Describe() string {
	state := s.State
	if state == "" {
		state = "unknown (no status yet)"
	}
	msg := "state " + state
	switch {
	case s.Ready():
		msg += " (" + reasonReconciled + ")"
	case s.ErrorReason != "":
		msg += " (" + s.ErrorReason
		if s.ErrorMessage != "" {
			msg += ": " + oneLine(s.ErrorMessage, 120)
		}
		msg += ")"
	}
	return msg
}

// GPUClusterReady waits until the GPUCluster name is ready (GPUClusterStatus.Ready). A GPUCluster the
// operator will not reconcile because a ClusterPolicy exists fails the wait once that has lasted
// GracePeriod.
func (w *Waiter) GPUClusterReady(ctx context.Context, name string) error {
	if w.Dynamic == nil {
		return fmt.Errorf("wait for gpucluster %s: no dynamic client", name)
	}
	clusters := w.Dynamic.Resource(GPUClusterResource())
	field := fields.OneTermEqualSelector("metadata.name", name).String()
	src := newSource("gpuclusters", w.Dynamic, &unstructured.Unstructured{},
		withSelectors("", field, asObject(clusters.List)),
		withSelectors("", field, clusters.Watch))
	var (
		operatorNS string
		blocked    time.Time // when PrerequisiteNotMet was first seen; zero while it is not reported
	)
	grace := w.gracePeriod()
	return w.until(ctx, waitSpec{
		what:      "gpucluster " + name,
		sources:   []*source{src},
		namespace: func() string { return operatorNS },
		eval: func(now time.Time) verdict {
			var gc *unstructured.Unstructured
			for _, o := range src.objects() {
				if u, ok := o.(*unstructured.Unstructured); ok && u.GetName() == name {
					gc = u
				}
			}
			if gc == nil {
				blocked = time.Time{}
				return verdict{progress: Progress{Message: "waiting for the GPUCluster to be created"}}
			}
			st := ReadGPUClusterStatus(gc)
			if st.Namespace != "" {
				operatorNS = st.Namespace
			}
			v := verdict{progress: Progress{Message: st.Describe()}}
			if st.Ready() {
				v.done = true
				return v
			}
			if st.ErrorReason != reasonPrerequisiteNotMet {
				blocked = time.Time{}
				return v
			}
			if blocked.IsZero() {
				blocked = now
			}
			if left := grace - now.Sub(blocked); left > 0 {
				v.recheck = left
				return v
			}
			v.fail, v.hint = ErrGPUClusterBlocked, "a ClusterPolicy and a GPUCluster cannot both exist: delete the ClusterPolicy (kubectl get clusterpolicies) or install without --dra"
			return v
		},
	})
}
