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
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// epoch is when every test's clocks start.
var epoch = time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)

// newClock is one machine's clock, at epoch plus skew.
func newClock(skew time.Duration) *clocktesting.FakeClock {
	return clocktesting.NewFakeClock(epoch.Add(skew))
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

// renewAs writes the Lease as its holder renewing it at renewTime (the holder's clock).
func renewAs(t *testing.T, cs *fake.Clientset, renewTime time.Time) {
	t.Helper()
	l := lease(t, cs)
	rt := metav1.NewMicroTime(renewTime)
	l.Spec.RenewTime = &rt
	if _, err := cs.CoordinationV1().Leases(DefaultNamespace).Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// holdWithoutRenewing takes the Lease as h would and never renews it: a run on another machine,
// killed, or one whose renewals the test writes itself (renewAs).
func holdWithoutRenewing(t *testing.T, cs *fake.Clientset, h *Holder, clk *clocktesting.FakeClock) {
	t.Helper()
	l := &Lock{Client: cs.CoordinationV1(), Holder: h, Clock: clk}
	l.defaults()
	if _, err := l.try(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// eventually waits for cond, looking every millisecond, for up to 30 s of real time: long enough for
// a loaded machine, and it returns as soon as cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// timerClock is a fake clock that says when a timer is set on it, which only a waiting Acquire does
// (a Held's renewals use a ticker).
type timerClock struct {
	*clocktesting.FakeClock
	timers chan time.Duration
}

func (c timerClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.timers <- d
	return t
}

// acquireStepping runs l.Acquire on clk, moving clk on to the end of each wait Acquire starts (after
// calling between, if set), and returns what Acquire returned.
func acquireStepping(t *testing.T, l *Lock, clk *clocktesting.FakeClock, between func()) (*Held, error) {
	t.Helper()
	timers := make(chan time.Duration)
	l.Clock = timerClock{FakeClock: clk, timers: timers}
	type result struct {
		h   *Held
		err error
	}
	done := make(chan result, 1)
	go func() {
		h, err := l.Acquire(t.Context())
		done <- result{h, err}
	}()
	for {
		select {
		case r := <-done:
			return r.h, r.err
		case d := <-timers:
			if between != nil {
				between()
			}
			clk.Step(d)
		case <-time.After(30 * time.Second):
			t.Fatal("Acquire neither returned nor waited again within 30 s")
		}
	}
}

func TestAcquire(t *testing.T) {
	t.Run("the first run creates the Lease in kube-system naming itself", func(t *testing.T) {
		cs := fake.NewClientset()
		clk := newClock(0)
		h, err := (&Lock{Client: cs.CoordinationV1(), Holder: run("alpha", 1), Clock: clk}).Acquire(t.Context())
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

	t.Run("a second run that does not wait is refused, naming the holder, with times on its own clock", func(t *testing.T) {
		cs := fake.NewClientset()
		// alpha's clock is an hour ahead of beta's: beta's error speaks of beta's clock only.
		h, err := (&Lock{Client: cs.CoordinationV1(), Holder: run("alpha", 1), Clock: newClock(time.Hour)}).Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release(context.Background())
		clk := newClock(10 * time.Second)
		_, err = (&Lock{Client: cs.CoordinationV1(), Holder: run("beta", 2), Clock: clk}).Acquire(t.Context())
		var held *HeldError
		if !errors.As(err, &held) || !errors.Is(err, ErrLocked) {
			t.Fatalf("err = %v, want a HeldError", err)
		}
		if held.Holder.Host != "alpha" || held.Holder.PID != 1 || held.Holder.Command != "gpuctl install --set x=1" {
			t.Errorf("holder %+v", held.Holder)
		}
		if !held.Renewed.Equal(clk.Now()) || !held.Expires.Equal(clk.Now().Add(30*time.Second)) {
			t.Errorf("renewed %s, expires %s; want this run's first look (%s) and 30 s after", held.Renewed, held.Expires, clk.Now())
		}
		for _, want := range []string{"alpha pid 1", "gpuctl install --set x=1", "since ", "unchanged since 2026-11-26T06:00:10Z by this machine's clock; a waiting run takes it over if it is still unchanged at 2026-11-26T06:00:40Z"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not say %q", err, want)
			}
		}
		if got := *lease(t, cs).Spec.HolderIdentity; got != "alpha/1" {
			t.Errorf("the refused run changed the holder to %s", got)
		}
	})

	for _, tc := range []struct {
		name, holder string
	}{
		{"a Lease that names nobody is taken at once, however recent its RenewTime", ""},
		{"a Lease that names this run is taken at once, however recent its RenewTime", "beta/2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			holdWithoutRenewing(t, cs, run("alpha", 1), newClock(time.Minute))
			l := lease(t, cs)
			l.Spec.HolderIdentity = &tc.holder
			if _, err := cs.CoordinationV1().Leases(DefaultNamespace).Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			h, err := (&Lock{Client: cs.CoordinationV1(), Holder: run("beta", 2), Clock: newClock(0)}).Acquire(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer h.Release(context.Background())
			if got := *lease(t, cs).Spec.HolderIdentity; got != "beta/2" {
				t.Errorf("holder %s", got)
			}
		})
	}

	t.Run("a waiting run takes over a Lease once it saw it go unrenewed for its duration", func(t *testing.T) {
		cs := fake.NewClientset()
		// A holder killed without releasing: acquired, never renewed.
		holdWithoutRenewing(t, cs, run("alpha", 1), newClock(0))
		waited := false
		h, err := acquireStepping(t, &Lock{Client: cs.CoordinationV1(), Holder: run("beta", 2), Wait: time.Minute,
			OnWait: func(*HeldError) { waited = true }}, newClock(0), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release(context.Background())
		if !waited || !h.Since.Equal(epoch.Add(30*time.Second)) {
			t.Errorf("taken at %s (waited: %v), want 30 s after the first look (%s)", h.Since, waited, epoch)
		}
		l := lease(t, cs)
		if *l.Spec.HolderIdentity != "beta/2" || l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions != 1 || l.Annotations[AnnotationHost] != "beta" {
			t.Errorf("lease %+v %v", l.Spec, l.Annotations)
		}
	})

	t.Run("a run that waits less than the Lease's duration is refused with how long it waited, even by a holder that stopped", func(t *testing.T) {
		cs := fake.NewClientset()
		holdWithoutRenewing(t, cs, run("alpha", 1), newClock(-time.Hour))
		_, err := acquireStepping(t, &Lock{Client: cs.CoordinationV1(), Holder: run("beta", 2), Wait: 10 * time.Second}, newClock(0), nil)
		var held *HeldError
		if !errors.As(err, &held) || held.Waited != 10*time.Second || !strings.Contains(err.Error(), "waited 10s") {
			t.Fatalf("err = %v, want a HeldError after waiting 10s", err)
		}
		if got := *lease(t, cs).Spec.HolderIdentity; got != "alpha/1" {
			t.Errorf("holder %s", got)
		}
	})

	t.Run("a released Lease is free at once, and a waiting run gets it", func(t *testing.T) {
		cs := fake.NewClientset()
		h, err := (&Lock{Client: cs.CoordinationV1(), Holder: run("alpha", 1), Clock: newClock(0)}).Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		clk := newClock(0)
		released := false
		h2, err := acquireStepping(t, &Lock{Client: cs.CoordinationV1(), Holder: run("beta", 2), Wait: time.Minute}, clk, func() {
			if !released {
				if err := h.Release(context.Background()); err != nil {
					t.Error(err)
				}
				released = true
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer h2.Release(context.Background())
		if d := clk.Since(epoch); d != DefaultPoll {
			t.Errorf("took it after %s, want the next look (%s)", d, DefaultPoll)
		}
		if got := *lease(t, cs).Spec.HolderIdentity; got != "beta/2" {
			t.Errorf("holder %s", got)
		}
	})

	t.Run("releasing clears the holder and keeps the Lease", func(t *testing.T) {
		cs := fake.NewClientset()
		h, err := (&Lock{Client: cs.CoordinationV1(), Holder: run("alpha", 1), Clock: newClock(0)}).Acquire(t.Context())
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

// A holder on another machine is judged alive by the renewals this run sees, timed on this run's
// own clock, never by the RenewTime it wrote: that time comes from its clock, which may be minutes
// off. The holder renews every 10 s (or stops), its Lease lasts 30 s, this run looks every 5 s.
func TestHolderIsJudgedByRenewalsSeen(t *testing.T) {
	for _, tc := range []struct {
		name string
		// skew is the holder's clock minus this run's; renewals are when it renews (this run's clock,
		// after the first look).
		skew     time.Duration
		renewals []time.Duration
		// takenAt is when this run takes the Lease (0: it holds off throughout the minute).
		takenAt time.Duration
	}{
		{name: "a renewing holder whose clock is an hour behind is held, though its RenewTime is an hour old",
			skew: -time.Hour, renewals: every(10*time.Second, time.Minute)},
		{name: "a renewing holder whose clock is a minute behind is held",
			skew: -time.Minute, renewals: every(10*time.Second, time.Minute)},
		{name: "a renewing holder whose clock is a minute ahead is held",
			skew: time.Minute, renewals: every(10*time.Second, time.Minute)},
		{name: "a holder whose clock is a minute ahead is taken once no renewal was seen for 30 s, though its RenewTime is in the future",
			skew: time.Minute, takenAt: 30 * time.Second},
		{name: "a holder whose clock is a minute behind is held for 30 s from the first look, though its RenewTime is a minute old",
			skew: -time.Minute, takenAt: 30 * time.Second},
		{name: "a holder whose clock agrees is held for 30 s from the first look",
			takenAt: 30 * time.Second},
		{name: "a holder that stops renewing is taken 30 s after the last renewal seen",
			skew: -time.Hour, renewals: []time.Duration{8 * time.Second, 18 * time.Second}, takenAt: 50 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			// The holder took its Lease a moment before this run's first look.
			holdWithoutRenewing(t, cs, run("workstation-7", 4242), newClock(tc.skew))
			clk := newClock(0)
			l := &Lock{Client: cs.CoordinationV1(), Holder: run("beta", 2), Clock: clk}
			l.defaults()
			renewals := tc.renewals
			seen := time.Duration(0) // when this run last saw the Lease change
			for at := time.Duration(0); at <= time.Minute; at += 5 * time.Second {
				clk.SetTime(epoch.Add(at))
				for len(renewals) > 0 && renewals[0] <= at {
					renewAs(t, cs, epoch.Add(renewals[0]+tc.skew))
					renewals = renewals[1:]
					seen = at
				}
				_, err := l.try(t.Context())
				var held *HeldError
				switch {
				case err == nil && (tc.takenAt == 0 || at < tc.takenAt):
					t.Fatalf("took the Lease at %s", at)
				case err == nil:
					if got := *lease(t, cs).Spec.HolderIdentity; got != "beta/2" {
						t.Fatalf("after taking it, the Lease is held by %s", got)
					}
					return
				case !errors.As(err, &held):
					t.Fatalf("at %s: %v", at, err)
				case at >= tc.takenAt && tc.takenAt != 0:
					t.Fatalf("at %s the Lease is still held: %v", at, err)
				case !held.Renewed.Equal(epoch.Add(seen)) || !held.Expires.Equal(epoch.Add(seen+30*time.Second)):
					t.Fatalf("at %s: renewed %s, expires %s; want the last change seen (%s) and 30 s after", at, held.Renewed, held.Expires, epoch.Add(seen))
				}
			}
			if tc.takenAt != 0 {
				t.Fatalf("never took the Lease")
			}
		})
	}
}

// every is the times from step up to end, step apart.
func every(step, end time.Duration) []time.Duration {
	var ts []time.Duration
	for at := step; at <= end; at += step {
		ts = append(ts, at)
	}
	return ts
}

func TestHeldRenews(t *testing.T) {
	t.Run("the holder renews the Lease every third of its duration while it runs", func(t *testing.T) {
		cs := fake.NewClientset()
		clk := newClock(0)
		h, err := (&Lock{Client: cs.CoordinationV1(), Holder: run("alpha", 1), Clock: clk}).Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release(context.Background())
		for i := 1; i <= 3; i++ {
			clk.Step(10 * time.Second)
			want := epoch.Add(time.Duration(i) * 10 * time.Second)
			eventually(t, fmt.Sprintf("renewal %d at %s", i, want), func() bool { return lease(t, cs).Spec.RenewTime.Time.Equal(want) })
		}
		if h.Err() != nil {
			t.Errorf("err %v", h.Err())
		}
	})

	t.Run("a holder whose Lease was taken over knows it lost the lock", func(t *testing.T) {
		cs := fake.NewClientset()
		clk := newClock(0)
		h, err := (&Lock{Client: cs.CoordinationV1(), Holder: run("alpha", 1), Clock: clk}).Acquire(t.Context())
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
		clk.Step(10 * time.Second)
		eventually(t, "told the lock was lost", func() bool {
			select {
			case <-h.Lost():
				return true
			default:
				return false
			}
		})
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
	var mu sync.Mutex
	down, refusals := false, 0
	cs.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			refusals++
			return true, nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
		}
		return false, nil, nil
	})
	refused := func() int { mu.Lock(); defer mu.Unlock(); return refusals }
	clk := newClock(0)
	h, err := (&Lock{Client: cs.CoordinationV1(), Holder: run("alpha", 1), Clock: clk}).Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(context.Background())
	// The API server restarts: every renewal fails for four Lease durations.
	mu.Lock()
	down = true
	mu.Unlock()
	for i := 1; i <= 12; i++ {
		clk.Step(10 * time.Second)
		eventually(t, fmt.Sprintf("renewal %d tried", i), func() bool { return refused() >= i })
		if h.Err() != nil {
			t.Fatalf("lost the lock while nobody could take it: %v", h.Err())
		}
	}
	mu.Lock()
	down = false
	mu.Unlock()
	clk.Step(10 * time.Second)
	eventually(t, "the Lease renewed once the API server was back", func() bool { return lease(t, cs).Spec.RenewTime.Time.Equal(clk.Now()) })
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
