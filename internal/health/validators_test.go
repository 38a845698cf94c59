package health

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestValidatorsReady(t *testing.T) {
	t.Run("the wait follows GPU nodes appearing and validators becoming ready on each", func(t *testing.T) {
		c := fake.NewClientset(testNode("gpu-1", nil), testNode("gpu-2", nil), testNode("cpu-1", nil))
		rec := newRecorder()
		w := &Waiter{Kube: c, OnProgress: rec.on}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		errc := run(ctx, func(ctx context.Context) error {
			_, err := w.ValidatorsReady(ctx, "gpu-operator", nil)
			return err
		})

		rec.waitForMessage(t, "waiting for GPU nodes: no node is labelled nvidia.com/gpu.present=true yet")
		// The operator labels the GPU nodes after NFD…
		mutateNode(t, c, "gpu-1", setLabel(GPUPresentLabel, "true"))
		mutateNode(t, c, "gpu-2", setLabel(GPUPresentLabel, "true"))
		p := rec.waitForMessage(t, "0/2 GPU nodes validated")
		if !slices.Equal(p.Pending, []string{"gpu-1", "gpu-2"}) {
			t.Errorf("pending = %v, want both GPU nodes", p.Pending)
		}
		// …then validators come up; ones that are not Ready, elsewhere, or in another namespace do not count.
		pods := c.CoreV1().Pods("gpu-operator")
		for _, pod := range []*corev1.Pod{
			validatorPod("nvidia-operator-validator-aaaaa", "gpu-1", true),
			validatorPod("nvidia-operator-validator-bbbbb", "gpu-2", false),
			validatorPod("nvidia-operator-validator-ccccc", "cpu-1", true),
		} {
			if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		other := validatorPod("nvidia-operator-validator-ddddd", "gpu-2", true)
		other.Namespace = "elsewhere"
		if _, err := c.CoreV1().Pods("elsewhere").Create(ctx, other, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p = rec.waitForMessage(t, "1/2 GPU nodes validated")
		if !slices.Equal(p.Pending, []string{"gpu-2"}) {
			t.Errorf("pending = %v, want gpu-2", p.Pending)
		}
		select {
		case err := <-errc:
			t.Fatalf("the wait returned %v with gpu-2 unvalidated", err)
		case <-time.After(200 * time.Millisecond):
		}
		if _, err := pods.Update(ctx, validatorPod("nvidia-operator-validator-bbbbb", "gpu-2", true), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := result(t, errc); err != nil {
			t.Fatalf("ValidatorsReady() = %v", err)
		}
	})

	t.Run("the informers list with the GPU-node and validator label selectors", func(t *testing.T) {
		c := fake.NewClientset(testNode("gpu-1", map[string]string{GPUPresentLabel: "true"}), validatorPod("v", "gpu-1", true))
		if _, err := (&Waiter{Kube: c}).ValidatorsReady(context.Background(), "gpu-operator", nil); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, a := range c.Actions() {
			if l, ok := a.(k8stesting.ListAction); ok {
				got[a.GetResource().Resource] = l.GetListRestrictions().Labels.String()
			}
		}
		want := map[string]string{"nodes": "nvidia.com/gpu.present=true", "pods": "app=nvidia-operator-validator"}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s list label selector = %q, want %q", k, got[k], v)
			}
		}
	})

	t.Run("a GPU node gpuctl knows of counts before the operator labels it, and the result names the validated nodes", func(t *testing.T) {
		// gpu-3 has a taint the operands do not tolerate: nothing ever labels or validates it.
		c := fake.NewClientset(
			testNode("gpu-1", map[string]string{GPUPresentLabel: "true"}),
			testNode("gpu-2", map[string]string{GPUPresentLabel: "true"}),
			testNode("gpu-3", nil),
			validatorPod("nvidia-operator-validator-aaaaa", "gpu-1", true),
			validatorPod("nvidia-operator-validator-bbbbb", "gpu-2", true),
		)
		rec := newRecorder()
		w := &Waiter{Kube: c, OnProgress: rec.on, DiagnoseTimeout: -1}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		type outcome struct {
			validated []string
			err       error
		}
		done := make(chan outcome, 1)
		go func() {
			v, err := w.ValidatorsReady(ctx, "gpu-operator", []string{"gpu-3", "gpu-1", "gone"})
			done <- outcome{v, err}
		}()
		p := rec.waitForMessage(t, "2/3 GPU nodes validated")
		if !slices.Equal(p.Pending, []string{"gpu-3"}) {
			t.Errorf("pending = %v, want gpu-3 (known, not labelled; the node that is gone does not count)", p.Pending)
		}
		select {
		case o := <-done:
			t.Fatalf("the wait returned (%v, %v) with gpu-3 unvalidated", o.validated, o.err)
		case <-time.After(200 * time.Millisecond):
		}
		if _, err := c.CoreV1().Pods("gpu-operator").Create(ctx, validatorPod("nvidia-operator-validator-ccccc", "gpu-3", true), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case o := <-done:
			if o.err != nil {
				t.Fatalf("ValidatorsReady() = %v", o.err)
			}
			if want := []string{"gpu-1", "gpu-2", "gpu-3"}; !slices.Equal(o.validated, want) {
				t.Errorf("validated = %v, want %v", o.validated, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the wait did not end once gpu-3 was validated")
		}
	})

	t.Run("a deadline while a known node is unvalidated names it and returns the nodes validated so far", func(t *testing.T) {
		c := fake.NewClientset(
			testNode("gpu-1", map[string]string{GPUPresentLabel: "true"}),
			testNode("gpu-2", nil),
			validatorPod("nvidia-operator-validator-aaaaa", "gpu-1", true),
		)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		validated, err := (&Waiter{Kube: c, DiagnoseTimeout: -1}).ValidatorsReady(ctx, "gpu-operator", []string{"gpu-2"})
		if err == nil || !strings.Contains(err.Error(), "1/2 GPU nodes validated (waiting for gpu-2)") {
			t.Errorf("ValidatorsReady() = %v, want a timeout naming gpu-2", err)
		}
		if !slices.Equal(validated, []string{"gpu-1"}) {
			t.Errorf("validated = %v, want [gpu-1]", validated)
		}
	})
}
