package lock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// clock is a settable clock for Lease expiry.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func run(host string, pid int) *Holder {
	return &Holder{Host: host, PID: pid, Command: "gpuctl install --set x=1", Identity: fmt.Sprintf("%s/%d", host, pid)}
}

func lease(t *testing.T, cs *fake.Clientset) *coordinationv1.Lease {
	t.Helper()
	l, err := cs.CoordinationV1().Leases(DefaultNamespace).Get(t.Context(), DefaultName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestAcquire(t *testing.T) {
	t.Run("the first run creates the Lease in kube-system naming itself", func(t *testing.T) {
		cs := fake.NewClientset()
		clk := &clock{t: time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)}
		h, err := (&Lock{Client: cs.CoordinationV1(), Holder: run("alpha", 1), Now: clk.Now}).Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release(context.Background())
		l := lease(t, cs)
		if *l.Spec.HolderIdentity != "alpha/1" || *l.Spec.LeaseDurationSeconds != 30 || !l.Spec.AcquireTime.Time.Equal(clk.Now()) {
			t.Errorf("lease spec %+v", l.Spec)
		}
		for k, want := range map[string]string{AnnotationHost: "alpha", AnnotationPID: "1", AnnotationCommand: "gpuctl install --set x=1", AnnotationSince: "2026-11-26T06:00:00Z"} {
			if l.Annotations[k] != want {
				t.Errorf("annotation %s = %q, want %q", k, l.Annotations[k], want)
			}
		}
		if !h.Since.Equal(clk.Now()) {
			t.Errorf("since %s", h.Since)
		}
	})

	t.Run("a second run that does not wait is refused, naming the holder", func(t *testing.T) {
		cs := fake.NewClientset()
		clk := &clock{t: time.Now()}
		h, err := (&Lock{Client: cs.CoordinationV1(), Holder: run("alpha", 1), Now: clk.Now}).Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release(context.Background())
		clk.Add(10 * time.Second)
		_, err = (&Lock{Client: cs.CoordinationV1(), Holder: run("beta", 2), Now: clk.Now}).Acquire(t.Context())
		var held *HeldError
		if !errors.As(err, &held) || !errors.Is(err, ErrLocked) {
			t.Fatalf("err = %v, want a HeldError", err)
		}
		if held.Holder.Host != "alpha" || held.Holder.PID != 1 || held.Holder.Command != "gpuctl install --set x=1" {
			t.Errorf("holder %+v", held.Holder)
		}
		for _, want := range []string{"alpha pid 1", "gpuctl install --set x=1", "since "} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not say %q", err, want)
			}
		}
		if got := *lease(t, cs).Spec.HolderIdentity; got != "alpha/1" {
			t.Errorf("the refused run changed the holder to %s", got)
		}
	})

	t.Run("an expired Lease is taken over", func(t *testing.T) {
		cs := fake.NewClientset()
		clk := &clock{t: time.Now()}
		// A holder killed without releasing: acquired, never renewed.
		first := &Lock{Client: cs.CoordinationV1(), Holder: run("alpha", 1), Now: clk.Now}
		first.defaults()
		if _, err := first.try(t.Context()); err != nil {
			t.Fatal(err)
		}
		clk.Add(29 * time.Second)
		if _, err := (&Lock{Client: cs.CoordinationV1(), Holder: run("beta", 2), Now: clk.Now}).Acquire(t.Context()); !errors.Is(err, ErrLocked) {
			t.Fatalf("before expiry: err = %v, want ErrLocked", err)
		}
		clk.Add(2 * time.Second)
		h, err := (&Lock{Client: cs.CoordinationV1(), Holder: run("beta", 2), Now: clk.Now}).Acquire(t.Context())
		if err != nil {
			t.Fatalf("after expiry: %v", err)
		}
		defer h.Release(context.Background())
		l := lease(t, cs)
		if *l.Spec.HolderIdentity != "beta/2" || l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions != 1 || l.Annotations[AnnotationHost] != "beta" {
			t.Errorf("lease %+v %v", l.Spec, l.Annotations)
		}
	})

	t.Run("a released Lease is free at once, and a waiting run gets it", func(t *testing.T) {
		cs := fake.NewClientset()
		h, err := (&Lock{Client: cs.CoordinationV1(), Holder: run("alpha", 1)}).Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(300 * time.Millisecond)
			h.Release(context.Background())
		}()
		start := time.Now()
		h2, err := (&Lock{Client: cs.CoordinationV1(), Holder: run("beta", 2), Wait: 10 * time.Second, Poll: 50 * time.Millisecond}).Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer h2.Release(context.Background())
		if d := time.Since(start); d < 250*time.Millisecond || d > 5*time.Second {
			t.Errorf("waited %s", d)
		}
		if got := *lease(t, cs).Spec.HolderIdentity; got != "beta/2" {
			t.Errorf("holder %s", got)
		}
	})

	t.Run("a run that waits no longer than --wait-for-lock is refused with how long it waited", func(t *testing.T) {
		cs := fake.NewClientset()
		h, err := (&Lock{Client: cs.CoordinationV1(), Holder: run("alpha", 1)}).Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release(context.Background())
		_, err = (&Lock{Client: cs.CoordinationV1(), Holder: run("beta", 2), Wait: 200 * time.Millisecond, Poll: 50 * time.Millisecond}).Acquire(t.Context())
		var held *HeldError
		if !errors.As(err, &held) || held.Waited < 200*time.Millisecond {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("releasing clears the holder and keeps the Lease", func(t *testing.T) {
		cs := fake.NewClientset()
		h, err := (&Lock{Client: cs.CoordinationV1(), Holder: run("alpha", 1)}).Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := h.Release(context.Background()); err != nil {
			t.Fatalf("second release: %v", err)
		}
		l := lease(t, cs)
		if l.Spec.HolderIdentity != nil || l.Annotations[AnnotationHost] != "" {
			t.Errorf("after release: %+v %v", l.Spec, l.Annotations)
		}
	})
}

func TestHeldRenews(t *testing.T) {
	t.Run("the holder renews the Lease while it runs", func(t *testing.T) {
		cs := fake.NewClientset()
		h, err := (&Lock{Client: cs.CoordinationV1(), Holder: run("alpha", 1), Duration: 300 * time.Millisecond}).Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release(context.Background())
		first := lease(t, cs).Spec.RenewTime.Time
		time.Sleep(700 * time.Millisecond)
		if got := lease(t, cs).Spec.RenewTime.Time; !got.After(first) {
			t.Errorf("renewTime %s not after %s", got, first)
		}
		if h.Err() != nil {
			t.Errorf("err %v", h.Err())
		}
	})

	t.Run("a holder whose Lease was taken over knows it lost the lock", func(t *testing.T) {
		cs := fake.NewClientset()
		h, err := (&Lock{Client: cs.CoordinationV1(), Holder: run("alpha", 1), Duration: 300 * time.Millisecond}).Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release(context.Background())
		l := lease(t, cs)
		other := "beta/2"
		l.Spec.HolderIdentity = &other
		if _, err := cs.CoordinationV1().Leases(DefaultNamespace).Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-h.Lost():
		case <-time.After(5 * time.Second):
			t.Fatal("not told the lock was lost")
		}
		if !errors.Is(h.Err(), ErrLost) || !strings.Contains(h.Err().Error(), "beta/2") {
			t.Errorf("err %v", h.Err())
		}
		// Release leaves the new holder's Lease alone.
		if err := h.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := *lease(t, cs).Spec.HolderIdentity; got != "beta/2" {
			t.Errorf("holder after release %s", got)
		}
	})
}

func TestAnUnreachableAPIServerDoesNotLoseTheLock(t *testing.T) {
	cs := fake.NewClientset()
	var down sync.Mutex
	refused := false
	cs.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		down.Lock()
		defer down.Unlock()
		if refused {
			return true, nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
		}
		return false, nil, nil
	})
	h, err := (&Lock{Client: cs.CoordinationV1(), Holder: run("alpha", 1), Duration: 300 * time.Millisecond}).Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(context.Background())
	// The API server restarts: every Lease request fails for several Lease durations.
	down.Lock()
	refused = true
	down.Unlock()
	select {
	case <-h.Lost():
		t.Fatalf("lost the lock while nobody could take it: %v", h.Err())
	case <-time.After(time.Second):
	}
	down.Lock()
	refused = false
	down.Unlock()
	before := lease(t, cs).Spec.RenewTime.Time
	deadline := time.Now().Add(5 * time.Second)
	for !lease(t, cs).Spec.RenewTime.Time.After(before) {
		if time.Now().After(deadline) {
			t.Fatal("the Lease was not renewed once the API server was back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if h.Err() != nil {
		t.Errorf("err %v after the API server came back", h.Err())
	}
}

func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gpuctl", "install", "--timeout", "5m"}, "gpuctl install --timeout 5m"},
		{[]string{"gpuctl", "install", "--set", "driver.licensingConfig.secretName=abc,x=1", "-f", "v.yaml"}, "gpuctl install --set driver.licensingConfig.secretName=…,x=… -f v.yaml"},
		{[]string{"gpuctl", "install", "--set=password=hunter2"}, "gpuctl install --set=password=…"},
	} {
		t.Run("the Lease shows "+tc.want, func(t *testing.T) {
			if got := commandLine(tc.args); got != tc.want {
				t.Errorf("got %q", got)
			}
		})
	}
}
