package health

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// recorder collects Progress reports and lets a test wait for a particular one.
type recorder struct {
	mu      sync.Mutex
	reports []Progress
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 1)} }

func (r *recorder) on(p Progress) {
	r.mu.Lock()
	r.reports = append(r.reports, p)
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) all() []Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reports)
}

func (r *recorder) messages() []string {
	var out []string
	for _, p := range r.all() {
		out = append(out, p.Message)
	}
	return out
}

// waitFor blocks until a report satisfies ok, failing the test after 10s.
func (r *recorder) waitFor(t *testing.T, what string, ok func(Progress) bool) Progress {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		for _, p := range r.all() {
			if ok(p) {
				return p
			}
		}
		select {
		case <-r.changed:
		case <-deadline:
			t.Fatalf("no progress report %s; got %q", what, r.messages())
		}
	}
}

func (r *recorder) waitForMessage(t *testing.T, msg string) Progress {
	t.Helper()
	return r.waitFor(t, "with message "+msg, func(p Progress) bool { return p.Message == msg })
}

// run starts wait in the background and returns a channel with its result.
func run(ctx context.Context, wait func(context.Context) error) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- wait(ctx) }()
	return errc
}

// result waits for the wait to return and asserts it did so within a second of the last change.
func result(t *testing.T, errc <-chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(time.Second):
		t.Fatal("the wait did not return within a second of its condition becoming true")
		return nil
	}
}

func testNode(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		}},
	}
}

// mutateNode reads, changes and writes a node, as another controller would.
func mutateNode(t *testing.T, c kubernetes.Interface, name string, f func(*corev1.Node)) {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f(n)
	if _, err := c.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func setLabel(k, v string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[k] = v
	}
}

func setAllocatable(resourceName, q string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		if n.Status.Allocatable == nil {
			n.Status.Allocatable = corev1.ResourceList{}
		}
		n.Status.Allocatable[corev1.ResourceName(resourceName)] = resource.MustParse(q)
	}
}

func validatorPod(name, node string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "gpu-operator", Labels: map[string]string{"app": validatorApp}},
		Spec:       corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
		},
	}
}
