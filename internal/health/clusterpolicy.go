package health

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/gpuctl/gpuctl/internal/kube"
)

// ClusterPolicyReady waits until the ClusterPolicy name has status.state "ready" and a Ready condition that is
// True with reason Reconciled.
//
// state "ready" alone does not prove anything: the operator also reports it with reason NoGPUNodes or
// NFDLabelsMissing (NVIDIA/gpu-operator controllers/clusterpolicy_controller.go@v26.7.0). Those
// reasons are normal for a short while after install, so they fail the wait only once they have lasted
// GracePeriod; the error then says what they mean. The same holds for state "ignored" (an older ClusterPolicy
// wins). Progress reports the state and the Ready condition's reason and message.
//
// On the DRA stack the stack's custom resource is GPUCluster gpu-cluster instead: NVIDIA's chart
// renders one or the other (templates/validations.yaml at v26.7.0), so where the ClusterPolicy is
// absent and the GPUCluster is there and not being deleted (a switch to --dra: Helm deleted the one
// and created the other before the waits), the wait is GPUClusterReady's.
func (w *Waiter) ClusterPolicyReady(ctx context.Context, name string) error {
	if w.Dynamic == nil {
		return fmt.Errorf("wait for clusterpolicy %s: no dynamic client", name)
	}
	if w.draStack(ctx, name) {
		return w.GPUClusterReady(ctx, gpuClusterName)
	}
	policies := w.Dynamic.Resource(ClusterPolicyResource())
	field := fields.OneTermEqualSelector("metadata.name", name).String()
	pw := &policyWait{
		name: name,
		src: newSource("clusterpolicies", w.Dynamic, &unstructured.Unstructured{},
			withSelectors("", field, asObject(policies.List)),
			withSelectors("", field, policies.Watch)),
		grace: w.gracePeriod(),
	}
	return w.until(ctx, waitSpec{
		what:      "clusterpolicy " + name,
		sources:   []*source{pw.src},
		namespace: func() string { return pw.operatorNS },
		eval:      pw.eval,
	})
}

// policyWait is one ClusterPolicyReady: the policy it watches and the "nothing to do" reason it has
// seen lasting.
type policyWait struct {
	name  string
	src   *source
	grace time.Duration

	operatorNS string    // status.namespace, where the operands run; for the diagnosis
	badReason  string    // the "nothing to do" reason currently reported
	badSince   time.Time // when it was first seen
}

// eval: done when the policy is ready; a reason that does not resolve by itself fails the wait once
// it has lasted the grace period.
func (pw *policyWait) eval(now time.Time) verdict {
	var policy *unstructured.Unstructured
	for _, o := range pw.src.objects() {
		if u, ok := o.(*unstructured.Unstructured); ok && u.GetName() == pw.name {
			policy = u
		}
	}
	if policy == nil {
		pw.badReason = ""
		return verdict{progress: Progress{Message: "waiting for the ClusterPolicy to be created"}}
	}
	st := ReadClusterPolicyStatus(policy)
	if st.Namespace != "" {
		pw.operatorNS = st.Namespace
	}
	v := verdict{progress: Progress{Message: st.describe()}}
	if st.Ready() {
		v.done = true
		return v
	}

	reason := st.ReadyReason
	if st.State == policyStateIgnored {
		reason = policyStateIgnored
	}
	cause, hint := policyFailure(reason)
	if cause == nil {
		pw.badReason = ""
		return v
	}
	if reason != pw.badReason {
		pw.badReason, pw.badSince = reason, now
	}
	if left := pw.grace - now.Sub(pw.badSince); left > 0 {
		v.recheck = left
		return v
	}
	v.fail, v.hint = cause, hint
	return v
}

// policyFailure maps a Ready reason (or state "ignored") that does not resolve by itself to an error and a hint.
func policyFailure(reason string) (error, string) {
	switch reason {
	case reasonNoGPUNodes:
		return ErrOperatorFoundNoGPUNodes, "no node is labelled " + GPUPresentLabel + "=true, because no node has one of NFD's NVIDIA PCI " +
			"labels (feature.node.kubernetes.io/pci-10de.present, pci-0300_10de.present, pci-0302_10de.present): check that " +
			"the NFD worker runs on the GPU nodes (it must tolerate the nvidia.com/gpu taint) and that the nodes have NVIDIA GPUs"
	case reasonNFDLabelsMissing:
		return ErrNFDLabelsMissing, "install Node Feature Discovery (the chart's nfd.enabled=true) or, if it is installed, " +
			"check that its worker pods run on the GPU nodes"
	case policyStateIgnored:
		return ErrPolicyIgnored, "only the oldest ClusterPolicy is honoured: delete the other one or use it (kubectl get clusterpolicies)"
	}
	return nil, ""
}

// ClusterPolicyStatus is what a ClusterPolicy's status says of its readiness: status.state (ready,
// notReady, ignored), status.namespace (where the operands run) and the Ready condition, whose
// reason says why (api/nvidia/v1/clusterpolicy_types.go and internal/conditions/consts.go at
// v26.7.0). It is the one reading of a ClusterPolicy's readiness: install's wait and gpuctl status
// both judge by it.
type ClusterPolicyStatus struct {
	State     string
	Namespace string
	// ReadyStatus, ReadyReason and ReadyMessage are the Ready condition's ("" where there is none).
	ReadyStatus, ReadyReason, ReadyMessage string
}

// ReadClusterPolicyStatus reads a ClusterPolicy's status; of several Ready conditions the last counts.
func ReadClusterPolicyStatus(u *unstructured.Unstructured) ClusterPolicyStatus {
	var st ClusterPolicyStatus
	st.State, _, _ = unstructured.NestedString(u.Object, "status", "state")
	st.Namespace, _, _ = unstructured.NestedString(u.Object, "status", "namespace")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		if t, _ := m["type"].(string); t != conditionReady {
			continue
		}
		st.ReadyStatus, _ = m["status"].(string)
		st.ReadyReason, _ = m["reason"].(string)
		st.ReadyMessage, _ = m["message"].(string)
	}
	return st
}

// Reconciled: the Ready condition is True with reason Reconciled. The operator also reports it True
// with reason NoGPUNodes, for want of work, which is not ready.
func (s ClusterPolicyStatus) Reconciled() bool {
	return s.ReadyStatus == string(metav1.ConditionTrue) && s.ReadyReason == reasonReconciled
}

// Ready: state ready and Reconciled. State ready alone proves nothing (ClusterPolicyReady says why).
func (s ClusterPolicyStatus) Ready() bool {
	return s.State == policyStateReady && s.Reconciled()
}

// describe renders the status as a progress line: "state notReady (OperandNotReady: …)".
func (s ClusterPolicyStatus) describe() string {
	state := s.State
	if state == "" {
		state = "unknown (no status yet)"
	}
	msg := "state " + state
	if s.ReadyReason != "" {
		msg += " (" + s.ReadyReason
		if s.ReadyMessage != "" {
			msg += ": " + oneLine(s.ReadyMessage, 120)
		}
		msg += ")"
	}
	return msg
}

// gpuClusterName is the only name the GPUCluster CRD allows (api/nvidia/v1alpha1/gpucluster_types.go
// at v26.7.0).
const gpuClusterName = "gpu-cluster"

// draStack reports whether the cluster runs the DRA stack in place of ClusterPolicy name: the policy is
// absent, and GPUCluster gpu-cluster exists and is not being deleted. One GET each, before the wait's
// informers: a cluster without the GPUCluster's CRD (operator releases before v26.7.0) must not get an
// informer that can never list.
func (w *Waiter) draStack(ctx context.Context, name string) bool {
	if _, err := w.Dynamic.Resource(ClusterPolicyResource()).Get(ctx, name, metav1.GetOptions{}); !kube.Absent(err) {
		return false
	}
	gc, err := w.Dynamic.Resource(GPUClusterResource()).Get(ctx, gpuClusterName, metav1.GetOptions{})
	return err == nil && gc.GetDeletionTimestamp() == nil
}
