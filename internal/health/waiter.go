package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gpuctl/gpuctl/internal/kube"
)

// Defaults for the zero-valued fields of Waiter.
const (
	defaultGracePeriod     = 30 * time.Second
	defaultDiagnoseTimeout = 20 * time.Second
)

// Waiter waits for parts of the GPU stack to become ready. Each method blocks until its condition holds, the
// context is cancelled, or its deadline passes; the context carries the timeout. The zero value of every field
// but Kube (and Dynamic, for ClusterPolicyReady) is a sensible default.
//
// A Waiter holds no state between calls and may be used for several waits, one after the other or at once.
type Waiter struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// OnProgress, if set, is called with the first snapshot and again on every change, from one goroutine per wait.
	OnProgress func(Progress)
	// GracePeriod is how long ClusterPolicyReady accepts a verdict that means "nothing to do here" (NoGPUNodes,
	// NFDLabelsMissing, ignored) before failing: the operator reports NoGPUNodes for a while after install, until
	// NFD has labelled the nodes and it has labelled them nvidia.com/gpu.present. 0 means 30s.
	GracePeriod time.Duration
	// Namespace is where the operator and its operands run. Diagnose looks at its pods when a wait that has no
	// namespace of its own (NodesLabelled, GPUsAllocatable, ClusterPolicyReady before the policy reports its
	// namespace) fails. Empty: such failures diagnose nodes only.
	Namespace string
	// DiagnoseTimeout bounds the diagnosis run after a wait failed, on a context detached from the expired one.
	// 0 means 20s; negative skips the diagnosis.
	DiagnoseTimeout time.Duration
}

// verdict is one evaluation of a wait's condition against the informers' caches.
type verdict struct {
	progress Progress
	done     bool
	// fail, when set, ends the wait with a StuckError wrapping it: the state will not resolve by itself.
	fail error
	hint string
	// recheck asks for another evaluation after this long even if nothing changes (grace periods).
	recheck time.Duration
}

// waitSpec describes one wait for Waiter.until.
type waitSpec struct {
	// what names what is waited for, for errors: "deployment gpu-operator/gpu-operator".
	what    string
	sources []*source
	eval    func(now time.Time) verdict
	// namespace returns the namespace to diagnose on failure; nil or "" means Waiter.Namespace.
	namespace func() string
	// pendingAreNodes makes a failed wait diagnose the nodes in the last Progress.Pending.
	pendingAreNodes bool
}

// source is one informer: a LIST+WATCH of one kind with selectors, whose cache the verdicts read.
type source struct {
	what     string
	informer cache.SharedIndexInformer
	// nodeLabels are the only label keys a cached node keeps (see slim).
	nodeLabels []string
}

// objects returns the cached objects. Callers must not modify them.
func (s *source) objects() []any { return s.informer.GetStore().List() }

// newSource builds an informer from list and watch functions that already apply the selectors.
//
// Informers instead of a bare watch because they re-list and re-watch on their own when a watch ends or expires
// (410 Gone after etcd compaction), and keep a cache to evaluate level-triggered conditions over many objects.
func newSource(what string, client any, obj runtime.Object,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
) *source {
	return &source{what: what, informer: kube.NewInformer(what, client, obj, list, watchFn)}
}

// withSelectors returns f with the label and field selectors applied to every call.
func withSelectors[T any](label, field string, f func(context.Context, metav1.ListOptions) (T, error)) func(context.Context, metav1.ListOptions) (T, error) {
	return func(ctx context.Context, o metav1.ListOptions) (T, error) {
		o.LabelSelector = label
		o.FieldSelector = field
		return f(ctx, o)
	}
}

// asObject adapts a typed List function to the informer's.
func asObject[L runtime.Object](f func(context.Context, metav1.ListOptions) (L, error)) func(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		l, err := f(ctx, o)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
}

// slim keeps of a cached object only what the verdicts read; at 2,000 GPU nodes the caches hold
// thousands of nodes and pods, and a node carries some 60 labels once NFD, the operator and GPU
// feature discovery have labelled it. A node keeps its identity, the label keys in s.nodeLabels and
// status.allocatable; a pod its identity, labels, node, phase and conditions; anything else loses
// its managed fields. Waits that need more must say so here.
func (s *source) slim(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Node:
		n := &corev1.Node{ObjectMeta: identity(&o.ObjectMeta)}
		for _, k := range s.nodeLabels {
			if v, ok := o.Labels[k]; ok {
				if n.Labels == nil {
					n.Labels = map[string]string{}
				}
				n.Labels[k] = v
			}
		}
		n.Status.Allocatable = o.Status.Allocatable
		return n, nil
	case *corev1.Pod:
		p := &corev1.Pod{ObjectMeta: identity(&o.ObjectMeta)}
		p.Labels = o.Labels
		p.Spec.NodeName = o.Spec.NodeName
		p.Status.Phase, p.Status.Conditions = o.Status.Phase, o.Status.Conditions
		return p, nil
	case metav1.Object:
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// identity is the part of an object's metadata that names it and says whether it is going away.
func identity(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, DeletionTimestamp: m.DeletionTimestamp}
}

// until runs the spec's informers and evaluates its condition after the caches sync and after every change,
// until the condition holds, fails, or ctx ends.
func (w *Waiter) until(ctx context.Context, spec waitSpec) error {
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait() // informers must be gone before we return, so nothing outlives the call
	}()
	r := &waitRun{w: w, spec: spec, cancel: cancel, changed: make(chan struct{}, 1), fatal: make(chan error, 1)}
	for _, s := range spec.sources {
		if err := r.start(runCtx, &wg, s); err != nil {
			return fmt.Errorf("wait for %s: %w", spec.what, err)
		}
	}
	if err := r.synced(ctx); err != nil {
		return err
	}
	return r.evaluate(ctx)
}

// waitRun is one call of Waiter.until: its informers tell the evaluation loop about changes and API
// errors through it.
type waitRun struct {
	w    *Waiter
	spec waitSpec
	// cancel stops the informers.
	cancel context.CancelFunc
	// changed holds a value when a cache changed since the last evaluation.
	changed chan struct{}
	// fatal receives an API error that waiting will not resolve (forbidden, unauthorized).
	fatal chan error
	// lastErr is the last API error any informer saw; a wait that times out names it.
	errMu   sync.Mutex
	lastErr error
}

// start runs one informer: its cache slimmed, every change notifying the loop, its API errors recorded.
func (r *waitRun) start(ctx context.Context, wg *sync.WaitGroup, s *source) error {
	if err := s.informer.SetTransform(s.slim); err != nil {
		return err
	}
	if err := s.informer.SetWatchErrorHandlerWithContext(r.watchErrorHandler(s.what)); err != nil {
		return err
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { r.notify() },
		UpdateFunc: func(any, any) { r.notify() },
		DeleteFunc: func(any) { r.notify() },
	}
	if _, err := s.informer.AddEventHandler(handler); err != nil {
		return err
	}
	wg.Go(func() { s.informer.RunWithContext(ctx) })
	return nil
}

// notify asks for another evaluation.
func (r *waitRun) notify() {
	select {
	case r.changed <- struct{}{}:
	default: // an evaluation is already pending; it will see this change too
	}
}

// watchErrorHandler decides what a list or watch error of the informer of what means: an expired or
// closed watch is routine, RBAC refusing it ends the wait now, anything else is remembered for the
// error at the deadline.
func (r *waitRun) watchErrorHandler(what string) cache.WatchErrorHandlerWithContext {
	return func(_ context.Context, _ *cache.Reflector, err error) {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || errors.Is(err, context.Canceled) ||
			errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return // an expired or closed watch: the reflector re-lists and re-watches; nothing is wrong
		}
		r.errMu.Lock()
		r.lastErr = fmt.Errorf("list and watch %s: %w", what, err)
		r.errMu.Unlock()
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			// RBAC will not change while we wait: fail now instead of at the deadline.
			select {
			case r.fatal <- fmt.Errorf("list and watch %s: %w", what, err):
			default:
			}
		}
	}
}

// synced waits for every informer's first list; a fatal API error or the end of ctx ends the wait.
func (r *waitRun) synced(ctx context.Context) error {
	for _, s := range r.spec.sources {
		select {
		case <-s.informer.HasSyncedChecker().Done():
		case err := <-r.fatal:
			return r.ended(ctx, verdict{}, err)
		case <-ctx.Done():
			return r.ended(ctx, verdict{progress: Progress{Message: "waiting for the first list of " + s.what}}, ctx.Err())
		}
	}
	return nil
}

// evaluate evaluates the condition now, after every change and when a verdict asks to look again,
// reporting progress when it changes, until the condition holds or fails, an API error is fatal, or
// ctx ends.
func (r *waitRun) evaluate(ctx context.Context) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var last verdict
	reported := false
	for {
		v := r.spec.eval(time.Now())
		if !reported || !v.progress.equal(last.progress) {
			reported = true
			if r.w.OnProgress != nil {
				r.w.OnProgress(v.progress)
			}
		}
		last = v
		if v.done {
			return nil
		}
		if v.fail != nil {
			r.cancel()
			return r.w.stuck(ctx, r.spec, v, v.fail, v.hint)
		}
		var recheck <-chan time.Time
		if v.recheck > 0 {
			if timer == nil {
				timer = time.NewTimer(v.recheck)
			} else {
				timer.Reset(v.recheck) // since Go 1.23 Reset never leaves a stale tick in the channel
			}
			recheck = timer.C
		}
		select {
		case <-r.changed:
		case <-recheck:
		case err := <-r.fatal:
			return r.ended(ctx, last, err)
		case <-ctx.Done():
			// One last look: the change that completes the wait may have raced with the deadline.
			if v := r.spec.eval(time.Now()); v.done {
				return nil
			}
			return r.ended(ctx, last, ctx.Err())
		}
	}
}

// ended stops the informers and builds the error of a wait that ended without its condition: at the
// deadline, with the last API error where there was one.
func (r *waitRun) ended(ctx context.Context, last verdict, cause error) error {
	r.cancel() // stop watching before the diagnosis lists things
	r.errMu.Lock()
	apiErr := r.lastErr
	r.errMu.Unlock()
	if apiErr != nil && errors.Is(cause, context.DeadlineExceeded) {
		cause = fmt.Errorf("%w; last API error: %w", cause, apiErr)
	}
	return r.w.stuck(ctx, r.spec, last, cause, "")
}

// stuck builds the error a failed wait returns. A cancelled context (Ctrl-C) is not a diagnosis-worthy failure:
// the user wants out, so it returns the plain context error without asking the API server anything more.
func (w *Waiter) stuck(ctx context.Context, spec waitSpec, last verdict, cause error, hint string) error {
	if errors.Is(cause, context.Canceled) {
		return fmt.Errorf("wait for %s: %w", spec.what, cause)
	}
	e := &StuckError{What: spec.what, Progress: last.progress, Err: cause, Hint: hint}
	if w.DiagnoseTimeout >= 0 {
		timeout := w.DiagnoseTimeout
		if timeout == 0 {
			timeout = defaultDiagnoseTimeout
		}
		// The wait's context has expired; the diagnosis gets its own bounded one that keeps its values.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		ns := w.Namespace
		if spec.namespace != nil {
			if n := spec.namespace(); n != "" {
				ns = n
			}
		}
		var nodes []string
		if spec.pendingAreNodes {
			nodes = last.progress.Pending
		}
		e.Report = Diagnose(dctx, w.Kube, ns, nodes)
	}
	return e
}

// gracePeriod is GracePeriod or its default.
func (w *Waiter) gracePeriod() time.Duration {
	if w.GracePeriod > 0 {
		return w.GracePeriod
	}
	return defaultGracePeriod
}
