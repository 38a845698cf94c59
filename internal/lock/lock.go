package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"
)

// Where the lock lives, and the annotations that describe its holder.
const (
	DefaultNamespace = "kube-system"
	DefaultName      = "gpuctl"

	AnnotationHost    = "gpuctl.io/lock-host"
	AnnotationPID     = "gpuctl.io/lock-pid"
	AnnotationCommand = "gpuctl.io/lock-command"
	AnnotationSince   = "gpuctl.io/lock-since"
	// AnnotationProcess identifies the holder's process on its machine (see processIdentity), so a
	// run on the same machine can tell that a holder killed with SIGKILL is gone.
	AnnotationProcess = "gpuctl.io/lock-process"
)

// Defaults of Lock's timing.
const (
	DefaultDuration = 30 * time.Second
	DefaultPoll     = time.Second
)

// ErrLocked is returned (wrapped in a *HeldError) when another run holds the lock.
var ErrLocked = errors.New("another gpuctl run holds the install lock")

// ErrLost is returned by Held.Err when the lock could not be renewed before it expired, or another
// run took it over.
var ErrLost = errors.New("gpuctl's install lock was lost")

// Holder describes a run that holds (or held) the lock.
type Holder struct {
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
	// Identity is the Lease's holderIdentity: host, pid and a random token, unique per run even when
	// two runs share a process (tests).
	Identity string `json:"identity"`
	// Process identifies the process on its machine ("" where that cannot be told).
	Process string `json:"process,omitempty"`
}

func (h Holder) String() string {
	s := fmt.Sprintf("%s pid %d", h.Host, h.PID)
	if h.Command != "" {
		s += fmt.Sprintf(" (%s)", h.Command)
	}
	if !h.Since.IsZero() {
		s += " since " + h.Since.UTC().Format(time.RFC3339)
	}
	return s
}

// HeldError says who holds the lock.
type HeldError struct {
	Lease  string
	Holder Holder
	// Renewed is when this run last saw the holder renew the Lease, or first saw it held, and Expires
	// when this run takes the Lease if it is still waiting and sees no renewal before: both on this
	// run's clock (see Lock.observe), not the holder's renewTime. A later run starts watching afresh.
	Renewed time.Time
	Expires time.Time
	Waited  time.Duration
}

func (e *HeldError) Error() string {
	msg := fmt.Sprintf("%s: %s (Lease %s unchanged since %s by this machine's clock; a waiting run takes it over if it is still unchanged at %s)", ErrLocked,
		e.Holder, e.Lease, e.Renewed.UTC().Format(time.RFC3339), e.Expires.UTC().Format(time.RFC3339))
	if e.Waited > 0 {
		msg += fmt.Sprintf("; waited %s", e.Waited.Round(time.Second))
	}
	return msg
}

func (e *HeldError) Unwrap() error { return ErrLocked }

// Lock takes the Lease. Zero values are sensible defaults except Client.
type Lock struct {
	Client coordinationclient.LeasesGetter
	// Namespace and Name of the Lease (default kube-system/gpuctl).
	Namespace, Name string
	// Holder is this run (default: Self()).
	Holder *Holder
	// Duration is how long the Lease is valid without renewal (default 30s); it is renewed every
	// third of it.
	Duration time.Duration
	// Wait is how long Acquire waits for another holder to release the lock (0: not at all). A
	// holder that stopped renewing is taken over only after Acquire has watched its Lease for the
	// Lease's duration, so a Wait shorter than that never takes over a dead holder's Lease.
	Wait time.Duration
	// Poll is how often a waiting Acquire looks again (default 1s).
	Poll time.Duration
	// Clock times the waits, the renewals and another holder's expiry (default: the real clock).
	Clock clock.WithTicker
	// OnWait, if set, is called once when Acquire starts waiting for another holder.
	OnWait func(*HeldError)

	// proc reads the process table (default: the real /proc).
	proc procFS
	// gone is the holder whose process was found gone when the lock was taken.
	gone *Holder
	// seen is another holder's Lease as this run last saw it change, at seenAt on Clock (see observe).
	seen   record
	seenAt time.Time
}

// Self describes the running process.
func Self() Holder {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	pid := os.Getpid()
	return Holder{Host: host, PID: pid, Command: commandLine(os.Args),
		Identity: fmt.Sprintf("%s/%d/%s", host, pid, hex.EncodeToString(b)),
		Process:  processIdentity(osProcFS{}, pid)}
}

// commandLine is args as one line for the Lease, which anyone who may read Leases in kube-system
// sees: the values of --set expressions are left out (keys kept), as they may carry credentials.
func commandLine(args []string) string {
	out := make([]string, len(args))
	hide := func(expr string) string {
		parts := strings.Split(expr, ",")
		for i, p := range parts {
			if k, _, ok := strings.Cut(p, "="); ok {
				parts[i] = k + "=…"
			}
		}
		return strings.Join(parts, ",")
	}
	for i, a := range args {
		out[i] = a
		switch {
		case i > 0 && (args[i-1] == "--set" || args[i-1] == "--set-string"):
			out[i] = hide(a)
		case strings.HasPrefix(a, "--set="), strings.HasPrefix(a, "--set-string="):
			flag, expr, _ := strings.Cut(a, "=")
			out[i] = flag + "=" + hide(expr)
		}
	}
	return strings.Join(out, " ")
}

func (l *Lock) defaults() {
	if l.Namespace == "" {
		l.Namespace = DefaultNamespace
	}
	if l.Name == "" {
		l.Name = DefaultName
	}
	if l.Duration <= 0 {
		l.Duration = DefaultDuration
	}
	if l.Poll <= 0 {
		l.Poll = DefaultPoll
	}
	if l.Clock == nil {
		l.Clock = clock.RealClock{}
	}
	if l.proc == nil {
		l.proc = osProcFS{}
	}
	if l.Holder == nil {
		h := Self()
		l.Holder = &h
	}
}

// Acquire takes the lock: creates the Lease, or takes it when it is free (released or expired). When
// another run holds it, Acquire waits up to Wait for it, then returns a *HeldError (errors.Is
// ErrLocked). The returned Held renews the Lease until Release; ctx bounds the wait and the renewals.
func (l *Lock) Acquire(ctx context.Context) (*Held, error) {
	l.defaults()
	start := l.Clock.Now()
	told := false
	for {
		since, err := l.try(ctx)
		if err == nil {
			return l.hold(ctx, since), nil
		}
		var held *HeldError
		if !errors.As(err, &held) {
			return nil, err
		}
		waited := l.Clock.Since(start)
		if waited >= l.Wait {
			if l.Wait > 0 {
				held.Waited = waited
			}
			return nil, held
		}
		if l.OnWait != nil && !told {
			l.OnWait(held)
			told = true
		}
		t := l.Clock.NewTimer(min(l.Poll, l.Wait-waited))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("waiting for gpuctl's install lock held by %s: %w", held.Holder, ctx.Err())
		case <-t.C():
		}
	}
}

func (l *Lock) leases() coordinationclient.LeaseInterface { return l.Client.Leases(l.Namespace) }

// try takes the lock once, or says who holds it.
func (l *Lock) try(ctx context.Context) (time.Time, error) {
	now := l.Clock.Now()
	l.gone = nil
	lease, err := l.leases().Get(ctx, l.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.Name, Namespace: l.Namespace}}
		l.stamp(lease, now)
		if _, err := l.leases().Create(ctx, lease, metav1.CreateOptions{FieldManager: "gpuctl"}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return l.try(ctx) // another run created it a moment ago: say who
			}
			return time.Time{}, fmt.Errorf("create Lease %s/%s: %w", l.Namespace, l.Name, err)
		}
		return now, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("read Lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	if held := l.heldByOther(lease, now); held != nil {
		return time.Time{}, held
	}
	if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		n := int32(1)
		if lease.Spec.LeaseTransitions != nil {
			n = *lease.Spec.LeaseTransitions + 1
		}
		lease.Spec.LeaseTransitions = &n
	}
	l.stamp(lease, now)
	// The Update carries the resourceVersion read above: of two runs taking a free Lease at once,
	// one gets a conflict and looks again.
	if _, err := l.leases().Update(ctx, lease, metav1.UpdateOptions{FieldManager: "gpuctl"}); err != nil {
		if apierrors.IsConflict(err) {
			return l.try(ctx)
		}
		return time.Time{}, fmt.Errorf("take Lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	return now, nil
}

// heldByOther says who holds the Lease when it names a holder other than this run that this run
// has seen renew it within the Lease's duration (see observe); nil when it is free to take.
func (l *Lock) heldByOther(lease *coordinationv1.Lease, now time.Time) *HeldError {
	id := ""
	if lease.Spec.HolderIdentity != nil {
		id = *lease.Spec.HolderIdentity
	}
	if id == "" || id == l.Holder.Identity {
		return nil
	}
	renewed, d := l.observe(lease, now)
	expires := renewed.Add(d)
	if !now.Before(expires) {
		return nil
	}
	a := lease.Annotations
	h := Holder{Identity: id, Host: a[AnnotationHost], Command: a[AnnotationCommand], Process: a[AnnotationProcess]}
	h.PID, _ = strconv.Atoi(a[AnnotationPID])
	h.Since, _ = time.Parse(time.RFC3339Nano, a[AnnotationSince])
	if h.Host == "" {
		h.Host = id
	}
	if h.Process != "" && processGone(l.proc, h.Process) {
		// Killed (SIGKILL, a crash) without releasing the Lease: nobody renews it any more.
		l.gone = &h
		return nil
	}
	return &HeldError{Lease: l.Namespace + "/" + l.Name, Holder: h, Renewed: renewed, Expires: expires}
}

// record is what a holder's renewal changes in its Lease. On an API server every write changes the
// resourceVersion; the holder and its times are compared too, for stores that keep no versions.
type record struct {
	version, holder, acquired, renewed string
	seconds                            int32
}

func recordOf(lease *coordinationv1.Lease) record {
	r := record{version: lease.ResourceVersion}
	if lease.Spec.HolderIdentity != nil {
		r.holder = *lease.Spec.HolderIdentity
	}
	if t := lease.Spec.AcquireTime; t != nil {
		r.acquired = t.UTC().Format(time.RFC3339Nano)
	}
	if t := lease.Spec.RenewTime; t != nil {
		r.renewed = t.UTC().Format(time.RFC3339Nano)
	}
	if lease.Spec.LeaseDurationSeconds != nil {
		r.seconds = *lease.Spec.LeaseDurationSeconds
	}
	return r
}

// observe returns when this run last saw another holder's Lease change (first saw it, if it has not
// changed since) and the Lease's duration: the holder is alive while that is less than the duration
// ago. Both ends are this run's clock (monotonic where the clock is the real one): the renewTime the
// holder wrote is read on its machine's clock, which may be minutes off ours, so it is never compared
// with now. client-go's leader election judges a leader the same way (observedTime in
// k8s.io/client-go/tools/leaderelection/leaderelection.go). A Lease seen for the first time may have
// been renewed a moment ago, so it counts as renewed now: a run that finds the lock held waits a
// whole duration before it takes over from a holder that stopped.
func (l *Lock) observe(lease *coordinationv1.Lease, now time.Time) (time.Time, time.Duration) {
	r := recordOf(lease)
	if l.seenAt.IsZero() || r != l.seen {
		l.seen, l.seenAt = r, now
	}
	d := l.Duration
	if r.seconds > 0 {
		d = time.Duration(r.seconds) * time.Second
	}
	return l.seenAt, d
}

func (l *Lock) stamp(lease *coordinationv1.Lease, now time.Time) {
	id := l.Holder.Identity
	secs := int32((l.Duration + time.Second - 1) / time.Second)
	t := metav1.NewMicroTime(now)
	lease.Spec.HolderIdentity = &id
	lease.Spec.LeaseDurationSeconds = &secs
	lease.Spec.AcquireTime = &t
	lease.Spec.RenewTime = &t
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[AnnotationHost] = l.Holder.Host
	lease.Annotations[AnnotationPID] = strconv.Itoa(l.Holder.PID)
	lease.Annotations[AnnotationCommand] = truncate(l.Holder.Command, 1024)
	lease.Annotations[AnnotationSince] = now.UTC().Format(time.RFC3339Nano)
	if l.Holder.Process != "" {
		lease.Annotations[AnnotationProcess] = l.Holder.Process
	} else {
		delete(lease.Annotations, AnnotationProcess)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Held is a lock this run holds.
type Held struct {
	l *Lock
	// Since is when the lock was taken.
	Since time.Time
	// TookOver is the earlier holder whose process was gone (killed) when this run took the lock,
	// nil when the lock was free or had expired.
	TookOver *Holder
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	err      error
	lost     chan struct{}
}

func (l *Lock) hold(ctx context.Context, since time.Time) *Held {
	ctx, cancel := context.WithCancel(ctx)
	h := &Held{l: l, Since: since, TookOver: l.gone, cancel: cancel, done: make(chan struct{}), lost: make(chan struct{})}
	// The ticker starts before Acquire returns, so the first renewal is due a third of the duration
	// after the lock was taken, whenever the goroutine gets to run.
	t := l.Clock.NewTicker(l.Duration / 3)
	go h.renew(ctx, t)
	return h
}

// Identity is the Lease's holderIdentity while this run holds it: unique per run (see Holder).
func (h *Held) Identity() string { return h.l.Holder.Identity }

// Lost is closed when the lock is lost (see Err).
func (h *Held) Lost() <-chan struct{} { return h.lost }

// Err is nil while the lock is held, else an error wrapping ErrLost.
func (h *Held) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

func (h *Held) renew(ctx context.Context, t clock.Ticker) {
	defer close(h.done)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		err := h.renewOnce(ctx)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		// The lock is lost only when the Lease says so: deleted, or held by someone else. A renewal
		// that fails because the API server cannot be reached (a control-plane restart) is retried at
		// every tick, however long it takes: while this run cannot reach the API server it cannot
		// write either, and nobody who took the Lease over in the meantime goes unnoticed, because
		// the next renewal reads the Lease first and updates it only at the version it read.
		if errors.Is(err, ErrLost) {
			h.mu.Lock()
			h.err = err
			h.mu.Unlock()
			close(h.lost)
			return
		}
	}
}

func (h *Held) renewOnce(ctx context.Context) error {
	lease, err := h.l.leases().Get(ctx, h.l.Name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: Lease %s/%s was deleted", ErrLost, h.l.Namespace, h.l.Name)
		}
		return err
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != h.l.Holder.Identity {
		who := "nobody"
		if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
			who = *lease.Spec.HolderIdentity
		}
		return fmt.Errorf("%w: Lease %s/%s is now held by %s", ErrLost, h.l.Namespace, h.l.Name, who)
	}
	t := metav1.NewMicroTime(h.l.Clock.Now())
	lease.Spec.RenewTime = &t
	_, err = h.l.leases().Update(ctx, lease, metav1.UpdateOptions{FieldManager: "gpuctl"})
	return err
}

// Release stops renewing and frees the Lease (when this run still holds it), so the next run need
// not wait for it to expire. It is safe to call more than once.
func (h *Held) Release(ctx context.Context) error {
	h.cancel()
	<-h.done
	lease, err := h.l.leases().Get(ctx, h.l.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release Lease %s/%s: %w", h.l.Namespace, h.l.Name, err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != h.l.Holder.Identity {
		return nil
	}
	lease.Spec.HolderIdentity = nil
	lease.Spec.AcquireTime = nil
	lease.Spec.RenewTime = nil
	for _, k := range []string{AnnotationHost, AnnotationPID, AnnotationCommand, AnnotationSince, AnnotationProcess} {
		delete(lease.Annotations, k)
	}
	if _, err := h.l.leases().Update(ctx, lease, metav1.UpdateOptions{FieldManager: "gpuctl"}); err != nil {
		return fmt.Errorf("release Lease %s/%s: %w", h.l.Namespace, h.l.Name, err)
	}
	return nil
}
