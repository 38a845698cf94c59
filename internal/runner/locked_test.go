package runner

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/lock"
	"github.com/gpuctl/gpuctl/internal/preflight"
)

// holderOf is the lock's Lease holder as the fake cluster has it ("" when free or absent).
func holderOf(t *testing.T, cs *fake.Clientset) string {
	t.Helper()
	l, err := cs.CoordinationV1().Leases(lock.DefaultNamespace).Get(context.Background(), lock.DefaultName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// anotherRun is the Lease of a run on another machine, renewed a moment ago.
func anotherRun() *coordinationv1.Lease {
	id, secs, now := "workstation-7/4242/cafe", int32(30), metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: lock.DefaultName, Namespace: lock.DefaultNamespace, Annotations: map[string]string{
			lock.AnnotationHost: "workstation-7", lock.AnnotationPID: "4242", lock.AnnotationCommand: "gpuctl install"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &id, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
	}
}

func TestLocked(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		// cluster prepares the fake cluster; fn is the locked run's body.
		cluster func(cs *fake.Clientset)
		fn      func(t *testing.T, cs *fake.Clientset, ctx context.Context, lk *Lock) error
		ran     bool
		want    func(err error) bool
		holder  string // the Lease's holder after Locked returns
	}{
		{
			name: "fn runs holding the lock, and the lock is free when it returns",
			fn: func(t *testing.T, cs *fake.Clientset, _ context.Context, lk *Lock) error {
				if got := holderOf(t, cs); got == "" || got != lk.RunID() {
					t.Errorf("fn runs while the Lease is held by %q, want this run (%q)", got, lk.RunID())
				}
				return nil
			},
			ran: true, want: func(err error) bool { return err == nil },
		},
		{
			name: "fn's error comes back as it is, and the lock is free",
			fn:   func(*testing.T, *fake.Clientset, context.Context, *Lock) error { return boom },
			ran:  true, want: func(err error) bool { return err == boom },
		},
		{
			name:    "another run's lock: ErrLocked naming it, and fn never runs",
			cluster: func(cs *fake.Clientset) { _ = cs.Tracker().Add(anotherRun()) },
			want: func(err error) bool {
				var held *lock.HeldError
				return errors.Is(err, lock.ErrLocked) && errors.As(err, &held) && held.Holder.PID == 4242
			},
			holder: "workstation-7/4242/cafe",
		},
		{
			name: "no permission to write the Lease: a failed preflight, and fn never runs",
			cluster: func(cs *fake.Clientset) {
				cs.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), lock.DefaultName, errors.New("RBAC"))
				})
			},
			want: func(err error) bool { return errors.Is(err, preflight.ErrFailed) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			if tc.cluster != nil {
				tc.cluster(cs)
			}
			ran := false
			err := Locked(t.Context(), &kube.Clients{Kube: cs}, 0, nil, func(ctx context.Context, lk *Lock) error {
				ran = true
				return tc.fn(t, cs, ctx, lk)
			})
			if !tc.want(err) {
				t.Errorf("err = %v", err)
			}
			if ran != tc.ran {
				t.Errorf("fn ran: %v, want %v", ran, tc.ran)
			}
			if got := holderOf(t, cs); got != tc.holder {
				t.Errorf("after Locked the Lease is held by %q, want %q", got, tc.holder)
			}
		})
	}
}

// A lock lost while fn runs (its Lease deleted) cancels fn's context with the loss as the cause, and
// the error says the run stopped because of it. The lock's clock is a fake one that fn moves on to
// the first renewal, which finds the Lease gone.
func TestLockedLost(t *testing.T) {
	cs := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC))
	l := &lock.Lock{Client: cs.CoordinationV1(), Clock: clk}
	err := locked(t.Context(), l, nil, func(ctx context.Context, _ *Lock) error {
		if err := cs.CoordinationV1().Leases(lock.DefaultNamespace).Delete(ctx, lock.DefaultName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		clk.Step(lock.DefaultDuration / 3)
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("fn's context was not cancelled within 30 s of the lost renewal")
		}
		if !errors.Is(context.Cause(ctx), lock.ErrLost) || Interrupted(ctx) {
			t.Errorf("fn's context ended with %v, want the lost lock as its cause", context.Cause(ctx))
		}
		return ctx.Err()
	})
	if !errors.Is(err, lock.ErrLost) {
		t.Errorf("err = %v, want it to say the lock was lost", err)
	}
}
