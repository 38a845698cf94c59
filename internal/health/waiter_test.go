package health

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestWaitTimeoutReturnsStuckError(t *testing.T) {
	t.Run("a deadline gives a StuckError naming what is stuck, with a diagnosis of the pending nodes", func(t *testing.T) {
		c := fake.NewClientset(
			testNode("gpu-1", map[string]string{GPUPresentLabel: "true"}),
			testNode("gpu-2", map[string]string{GPUPresentLabel: "true"}),
			validatorPod("nvidia-operator-validator-aaaaa", "gpu-1", true),
			validatorPod("nvidia-operator-validator-bbbbb", "gpu-2", false),
		)
		w := &Waiter{Kube: c}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := w.ValidatorsReady(ctx, "gpu-operator", nil)

		var stuck *StuckError
		if !errors.As(err, &stuck) {
			t.Fatalf("ValidatorsReady() = %v (%T), want a *StuckError", err, err)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %v does not wrap context.DeadlineExceeded", err)
		}
		want := "GPU Operator validators in gpu-operator not ready: 1/2 GPU nodes validated (waiting for gpu-2): context deadline exceeded"
		if err.Error() != want {
			t.Errorf("Error() = %q\nwant      %q", err.Error(), want)
		}
		if len(stuck.Report.Nodes) != 1 || stuck.Report.Nodes[0].Name != "gpu-2" {
			t.Errorf("diagnosed nodes = %+v, want only gpu-2", stuck.Report.Nodes)
		}
		if len(stuck.Report.Pods) != 1 || stuck.Report.Pods[0].Name != "nvidia-operator-validator-bbbbb" {
			t.Errorf("diagnosed pods = %+v, want the unready validator", stuck.Report.Pods)
		}
	})

	t.Run("a cancelled context returns the cancellation without a diagnosis", func(t *testing.T) {
		c := fake.NewClientset(testNode("gpu-1", nil))
		rec := newRecorder()
		w := &Waiter{Kube: c, OnProgress: rec.on}
		ctx, cancel := context.WithCancel(context.Background())
		errc := run(ctx, func(ctx context.Context) error { return w.GPUsAllocatable(ctx, []string{"gpu-1"}) })
		rec.waitForMessage(t, "0/1 GPU nodes advertise nvidia.com/gpu")
		before := len(c.Actions())
		cancel()
		err := result(t, errc)
		var stuck *StuckError
		if !errors.Is(err, context.Canceled) || errors.As(err, &stuck) {
			t.Fatalf("GPUsAllocatable() = %v (%T), want a plain context.Canceled", err, err)
		}
		for _, a := range c.Actions()[before:] {
			if a.GetVerb() == "list" {
				t.Errorf("listed %s after cancellation; a cancelled wait must not diagnose", a.GetResource().Resource)
			}
		}
	})

	t.Run("a Forbidden list fails at once instead of at the deadline", func(t *testing.T) {
		c := fake.NewClientset(testNode("gpu-1", nil))
		c.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New(`User "ci" cannot list resource "nodes"`))
		})
		w := &Waiter{Kube: c, DiagnoseTimeout: -1}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		err := w.GPUsAllocatable(ctx, []string{"gpu-1"})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("GPUsAllocatable() = %v, want it to wrap Forbidden", err)
		}
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Errorf("took %v to fail on Forbidden", elapsed)
		}
		if !strings.Contains(err.Error(), "cannot list resource") {
			t.Errorf("error %q does not carry the API server's message", err)
		}
	})
}

func TestStuckErrorIsOneLine(t *testing.T) {
	tests := []struct {
		name string
		err  *StuckError
		want string
	}{
		{
			name: "many pending nodes are abbreviated",
			err: &StuckError{What: "allocatable GPUs on 5 nodes", Progress: Progress{Message: "1/5 GPU nodes advertise nvidia.com/gpu",
				Pending: []string{"a", "b", "c", "d"}}, Err: context.DeadlineExceeded},
			want: "allocatable GPUs on 5 nodes not ready: 1/5 GPU nodes advertise nvidia.com/gpu (waiting for a, b, c and 1 more): context deadline exceeded",
		},
		{
			name: "a cause without progress reads naturally",
			err:  &StuckError{What: "clusterpolicy cluster-policy", Err: ErrOperatorFoundNoGPUNodes},
			want: "clusterpolicy cluster-policy not ready: the GPU Operator found no GPU nodes",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q\nwant      %q", got, tt.want)
			}
		})
	}
}
