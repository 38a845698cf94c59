package health

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
)

// clusterPolicy builds a ClusterPolicy as the GPU Operator v26.7.0 reports it; an empty state means no status.
func clusterPolicy(state, readyStatus, reason string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nvidia.com/v1",
		"kind":       "ClusterPolicy",
		"metadata":   map[string]any{"name": "cluster-policy"},
		"spec":       map[string]any{},
	}}
	if state != "" {
		u.Object["status"] = map[string]any{
			"state":     state,
			"namespace": "gpu-operator",
			"conditions": []any{
				map[string]any{"type": "Ready", "status": readyStatus, "reason": reason, "message": "msg for " + reason},
				map[string]any{"type": "Error", "status": "False", "reason": reason},
			},
		}
	}
	return u
}

func newDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{ClusterPolicyResource(): "ClusterPolicyList"}, objs...)
}

func TestClusterPolicyReady(t *testing.T) {
	tests := []struct {
		name    string
		initial *unstructured.Unstructured
		// steps are written one after the other once the wait reported progress, each after waitAfter.
		steps     []*unstructured.Unstructured
		grace     time.Duration
		wantErr   error
		wantHint  string
		wantFinal string
	}{
		{
			name:      "the wait ends when the policy is ready with reason Reconciled",
			initial:   clusterPolicy("notReady", "False", "OperandNotReady"),
			steps:     []*unstructured.Unstructured{clusterPolicy("ready", "True", "Reconciled")},
			wantFinal: "state ready (Reconciled: msg for Reconciled)",
		},
		{
			name:      "the wait covers the policy being created and getting its first status",
			steps:     []*unstructured.Unstructured{clusterPolicy("", "", ""), clusterPolicy("ready", "True", "Reconciled")},
			wantFinal: "state ready (Reconciled: msg for Reconciled)",
		},
		{
			name:      "NoGPUNodes shorter than the grace period is tolerated",
			initial:   clusterPolicy("ready", "False", "NoGPUNodes"),
			steps:     []*unstructured.Unstructured{clusterPolicy("notReady", "False", "OperandNotReady"), clusterPolicy("ready", "True", "Reconciled")},
			grace:     5 * time.Second,
			wantFinal: "state ready (Reconciled: msg for Reconciled)",
		},
		{
			name:     "state ready with NoGPUNodes past the grace period fails and says what it means",
			initial:  clusterPolicy("ready", "False", "NoGPUNodes"),
			grace:    100 * time.Millisecond,
			wantErr:  ErrOperatorFoundNoGPUNodes,
			wantHint: "NFD worker runs on the GPU nodes",
		},
		{
			name:     "NFDLabelsMissing past the grace period fails and says to install NFD",
			initial:  clusterPolicy("ready", "True", "NFDLabelsMissing"),
			grace:    100 * time.Millisecond,
			wantErr:  ErrNFDLabelsMissing,
			wantHint: "install Node Feature Discovery",
		},
		{
			name:     "an ignored policy past the grace period fails",
			initial:  clusterPolicy("ignored", "False", ""),
			grace:    100 * time.Millisecond,
			wantErr:  ErrPolicyIgnored,
			wantHint: "only the oldest ClusterPolicy is honoured",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			if tt.initial != nil {
				objs = append(objs, tt.initial)
			}
			dyn := newDynamic(objs...)
			rec := newRecorder()
			w := &Waiter{Kube: fake.NewClientset(), Dynamic: dyn, OnProgress: rec.on, GracePeriod: tt.grace}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			errc := run(ctx, func(ctx context.Context) error { return w.ClusterPolicyReady(ctx, "cluster-policy") })
			rec.waitFor(t, "at all", func(Progress) bool { return true })
			policies := dyn.Resource(ClusterPolicyResource())
			exists := tt.initial != nil
			for _, s := range tt.steps {
				var err error
				if exists {
					_, err = policies.Update(ctx, s, metav1.UpdateOptions{})
				} else {
					_, err = policies.Create(ctx, s, metav1.CreateOptions{})
					exists = true
				}
				if err != nil {
					t.Fatal(err)
				}
				want := (ClusterPolicyStatus{}).describe()
				if st := ReadClusterPolicyStatus(s); st.State != "" {
					want = st.describe()
				}
				rec.waitForMessage(t, want)
			}
			var err error
			select {
			case err = <-errc:
			case <-time.After(5 * time.Second):
				t.Fatal("the wait did not return")
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ClusterPolicyReady() = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				var stuck *StuckError
				if !errors.As(err, &stuck) {
					t.Fatalf("error %T is not a *StuckError", err)
				}
				if !strings.Contains(stuck.Hint, tt.wantHint) {
					t.Errorf("hint = %q, want it to mention %q", stuck.Hint, tt.wantHint)
				}
				if elapsed := time.Since(start); elapsed < tt.grace {
					t.Errorf("failed after %v, before the grace period of %v", elapsed, tt.grace)
				}
				if stuck.Report.Namespace != "gpu-operator" {
					t.Errorf("diagnosed namespace %q, want the policy's status.namespace gpu-operator", stuck.Report.Namespace)
				}
			}
			if tt.wantFinal != "" {
				if got := rec.messages(); got[len(got)-1] != tt.wantFinal {
					t.Errorf("last progress = %q, want %q", got[len(got)-1], tt.wantFinal)
				}
			}
		})
	}
}

func TestReadClusterPolicyStatus(t *testing.T) {
	tests := []struct {
		name                string
		policy              *unstructured.Unstructured
		reconciled, ready   bool
		wantState, wantNote string
	}{
		{"state ready and Ready True with Reconciled is ready", clusterPolicy("ready", "True", "Reconciled"), true, true, "ready", "msg for Reconciled"},
		{"state ready with NoGPUNodes is not ready, though the condition is True", clusterPolicy("ready", "True", "NoGPUNodes"), false, false, "ready", "msg for NoGPUNodes"},
		{"a reconciled condition with state notReady is not ready", clusterPolicy("notReady", "True", "Reconciled"), true, false, "notReady", "msg for Reconciled"},
		{"Ready False is not reconciled", clusterPolicy("notReady", "False", "OperandNotReady"), false, false, "notReady", "msg for OperandNotReady"},
		{"a policy without status is neither", clusterPolicy("", "", ""), false, false, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := ReadClusterPolicyStatus(tc.policy)
			if st.Reconciled() != tc.reconciled || st.Ready() != tc.ready {
				t.Errorf("Reconciled() = %v, Ready() = %v, want %v, %v", st.Reconciled(), st.Ready(), tc.reconciled, tc.ready)
			}
			if st.State != tc.wantState || st.ReadyMessage != tc.wantNote {
				t.Errorf("read state %q, message %q, want %q, %q", st.State, st.ReadyMessage, tc.wantState, tc.wantNote)
			}
		})
	}
}
