package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	docschema "github.com/gpuctl/gpuctl/e2e/schema"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/lock"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
)

// verifyPlanDoc is the part of a VerifyResult document this test reads, by its JSON field names (they
// are the documented interface: docs/schemas/VerifyResult.json).
type verifyPlanDoc struct {
	DryRun bool          `json:"dryRun"`
	Plan   *verifyPlanV1 `json:"plan"`
	Done   *verifyPlanV1 `json:"done"`
}

type verifyPlanV1 struct {
	RunID     string `json:"runID"`
	Namespace string `json:"namespace"`
	Image     string `json:"image"`
	Delete    []struct {
		Namespace string    `json:"namespace"`
		Name      string    `json:"name"`
		UID       types.UID `json:"uid"`
		Why       string    `json:"why"`
	} `json:"delete"`
	Create      []verifyPodV1 `json:"create"`
	DeleteAtEnd []string      `json:"deleteAtEnd"`
}

// verifyPodV1 is a pod of a verify plan's create list.
type verifyPodV1 struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Node      string `json:"node"`
	Image     string `json:"image"`
	Resource  string `json:"resource"`
}

// TestVerifyDryRunIsTheRun leaves a pod of an earlier verify run behind, and checks that
// gpuctl verify --dry-run lists it (with its UID) and the pods it would create, writing nothing, not
// even the lock's Lease; and that the run then deletes and creates exactly what the dry run listed.
// No operator runs: nothing advertises nvidia.com/gpu, so the workloads stay unschedulable and the
// run ends at its --timeout with exit 8; what it deleted and created is the point here.
func TestVerifyDryRunIsTheRun(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1}, NoOperator: true})
	ctx := t.Context()
	const ns = "gpu-operator"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := record.Write(ctx, c.Kube, &record.Record{Command: "install", Namespace: ns}); err != nil {
		t.Fatal(err)
	}
	gpu := simulatedGPUNodes(c)
	for _, n := range gpu {
		patch := []byte(`{"metadata":{"labels":{"` + health.GPUPresentLabel + `":"true"}}}`)
		if _, err := c.Kube.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The pod a verify run killed with SIGKILL leaves: its labels, nothing else of gpuctl's.
	earlier, err := c.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gpuctl-verify-" + gpu[0] + "-0a0a0a", Labels: map[string]string{
			engine.VerifyNameLabel: plan.VerifyName, "app.kubernetes.io/managed-by": "gpuctl", engine.VerifyRunLabel: "0a0a0a"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vectoradd", Image: engine.DefaultVerifyImage}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	before := writableState(t, c)
	code, stdout, stderr := gpuctl(t, c, "verify", "--dry-run", "-o", "json")
	if code != 0 {
		t.Fatalf("verify --dry-run: exit %d:\n%s", code, stderr)
	}
	if kind, err := docschema.Validate([]byte(stdout)); err != nil || kind != "VerifyResult" {
		t.Errorf("-o json (%s) does not match its schema: %v", kind, err)
	}
	dry := decodeVerifyPlan(t, stdout)
	p := dry.Plan
	if !dry.DryRun || p == nil {
		t.Fatalf("verify --dry-run printed no plan:\n%s", stdout)
	}

	t.Run("the dry run lists the earlier pod by UID and one pod per GPU node", func(t *testing.T) {
		if len(p.Delete) != 1 || p.Delete[0].Name != earlier.Name || p.Delete[0].Namespace != ns || p.Delete[0].UID != earlier.UID || p.Delete[0].Why == "" {
			t.Errorf("plan deletes %+v, want %s/%s (uid %s) with why", p.Delete, ns, earlier.Name, earlier.UID)
		}
		var nodes, names []string
		for _, cr := range p.Create {
			nodes = append(nodes, cr.Node)
			names = append(names, cr.Name)
			if cr.Image != engine.DefaultVerifyImage || cr.Namespace != ns {
				t.Errorf("plan creates %+v, want image %s in %s", cr, engine.DefaultVerifyImage, ns)
			}
		}
		if !slices.Equal(nodes, gpu) {
			t.Errorf("plan creates pods on %v, want %v", nodes, gpu)
		}
		if !slices.Equal(p.DeleteAtEnd, names) {
			t.Errorf("plan deletes %v at the end, want the pods it creates %v", p.DeleteAtEnd, names)
		}
	})

	t.Run("the dry run writes nothing: no pod, no Lease", func(t *testing.T) {
		if got := verifyPodUIDs(t, c); !reflect.DeepEqual(got, map[string]types.UID{earlier.Name: earlier.UID}) {
			t.Errorf("verify pods after the dry run: %v, want only the earlier one", got)
		}
		if _, err := c.Kube.CoordinationV1().Leases(lock.DefaultNamespace).Get(ctx, lock.DefaultName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the dry run wrote the lock's Lease (get: %v)", err)
		}
		assertUnchanged(t, before, writableState(t, c))
	})

	t.Run("the run deletes and creates exactly what the dry run listed, as the API server shows", func(t *testing.T) {
		// What the run wrote is read from the API server while it runs (its pods are gone when it
		// ends): each pod as created, and each deletion, by UID.
		w := watchVerifyPods(t, c, ns)
		code, stdout, stderr := gpuctl(t, c, "verify", "--timeout", "3s", "-o", "json")
		seen := w.stop(t)
		if code != cli.ExitVerifyFailed {
			t.Fatalf("exit %d, want %d (the workloads cannot schedule here):\n%s", code, cli.ExitVerifyFailed, stderr)
		}
		if kind, err := docschema.Validate([]byte(stdout)); err != nil || kind != "VerifyResult" {
			t.Errorf("-o json (%s) does not match its schema: %v", kind, err)
		}
		run := decodeVerifyPlan(t, stdout)
		if run.DryRun || run.Done == nil {
			t.Fatalf("the run reports nothing done:\n%s", stdout)
		}

		var created []verifyPodV1
		for _, pod := range seen.created {
			created = append(created, podAsPlanned(pod))
			want := map[string]string{engine.VerifyNameLabel: plan.VerifyName, "app.kubernetes.io/managed-by": "gpuctl", engine.VerifyRunLabel: p.RunID}
			if !maps.Equal(pod.Labels, want) || len(pod.OwnerReferences) > 0 {
				t.Errorf("pod %s was created with labels %v and owners %v, want labels %v of run %s and no owner", pod.Name, pod.Labels, pod.OwnerReferences, want, p.RunID)
			}
		}
		if !slices.Equal(created, p.Create) {
			t.Errorf("the API server shows the run created\n%+v\nthe dry run listed\n%+v", created, p.Create)
		}
		if !slices.Equal(run.Done.Create, created) {
			t.Errorf("the run reports it created\n%+v\nthe API server shows\n%+v", run.Done.Create, created)
		}

		var deletedEarlier, deletedAtEnd []string
		for _, pod := range seen.deleted {
			switch i := slices.IndexFunc(seen.created, func(c corev1.Pod) bool { return c.UID == pod.UID }); {
			case i >= 0:
				deletedAtEnd = append(deletedAtEnd, pod.Name)
			case pod.UID == earlier.UID:
				deletedEarlier = append(deletedEarlier, pod.Namespace+"/"+pod.Name+" "+string(pod.UID))
			default:
				t.Errorf("the run deleted pod %s/%s (uid %s), which it neither listed nor created", pod.Namespace, pod.Name, pod.UID)
			}
		}
		var listedEarlier, reportedEarlier []string
		for _, d := range p.Delete {
			listedEarlier = append(listedEarlier, d.Namespace+"/"+d.Name+" "+string(d.UID))
		}
		for _, d := range run.Done.Delete {
			reportedEarlier = append(reportedEarlier, d.Namespace+"/"+d.Name+" "+string(d.UID))
		}
		if !slices.Equal(deletedEarlier, listedEarlier) || !slices.Equal(reportedEarlier, listedEarlier) {
			t.Errorf("earlier pods: the API server shows %v deleted, the run reports %v, the dry run listed %v", deletedEarlier, reportedEarlier, listedEarlier)
		}
		slices.Sort(deletedAtEnd)
		if listed := slices.Sorted(slices.Values(p.DeleteAtEnd)); !slices.Equal(deletedAtEnd, listed) || !slices.Equal(run.Done.DeleteAtEnd, p.DeleteAtEnd) {
			t.Errorf("at the end: the API server shows %v deleted, the run reports %v, the dry run listed %v", deletedAtEnd, run.Done.DeleteAtEnd, p.DeleteAtEnd)
		}
		if got := verifyPodUIDs(t, c); len(got) > 0 {
			t.Errorf("verify left pods behind: %v", got)
		}
	})
}

func decodeVerifyPlan(t *testing.T, stdout string) verifyPlanDoc {
	t.Helper()
	var doc verifyPlanDoc
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("verify -o json: %v\n%s", err, stdout)
	}
	return doc
}

// podAsPlanned is a pod as the API server holds it, in the shape of a verify plan's create list: its
// node is the one it is bound to, or else the one its required node affinity names.
func podAsPlanned(pod corev1.Pod) verifyPodV1 {
	vp := verifyPodV1{Namespace: pod.Namespace, Name: pod.Name, Node: pod.Spec.NodeName}
	if a := pod.Spec.Affinity; vp.Node == "" && a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		var nodes []string
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range term.MatchFields {
				if f.Key == "metadata.name" {
					nodes = append(nodes, f.Values...)
				}
			}
		}
		vp.Node = strings.Join(nodes, ",")
	}
	var images, resources []string
	for _, ct := range pod.Spec.Containers {
		images = append(images, ct.Image)
		for r := range ct.Resources.Limits {
			resources = append(resources, string(r))
		}
	}
	vp.Image = strings.Join(images, ",")
	slices.Sort(resources)
	vp.Resource = strings.Join(resources, ",")
	return vp
}

// podWatch records the verify pods of a namespace as the API server shows them from the moment it
// starts: each as created (its ADDED event) and each deletion, in order.
type podWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	seen   watchedPods
	err    error
}

type watchedPods struct {
	created, deleted []corev1.Pod
}

func watchVerifyPods(t *testing.T, c *sandbox.Cluster, ns string) *podWatch {
	t.Helper()
	pods := c.Kube.CoreV1().Pods(ns)
	opts := metav1.ListOptions{LabelSelector: engine.VerifyNameLabel + "=" + plan.VerifyName}
	list, err := pods.List(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = opts.LabelSelector
			return pods.Watch(ctx, o)
		},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w := &podWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				w.mu.Lock()
				switch pod, _ := ev.Object.(*corev1.Pod); {
				case ev.Type == watch.Error:
					w.err = apierrors.FromObject(ev.Object)
				case ev.Type == watch.Added && pod != nil:
					w.seen.created = append(w.seen.created, *pod)
				case ev.Type == watch.Deleted && pod != nil:
					w.seen.deleted = append(w.seen.deleted, *pod)
				}
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// stop waits, up to a minute, until the watch has seen every pod it saw created deleted, ends it and
// returns what it saw.
func (w *podWatch) stop(t *testing.T) watchedPods {
	t.Helper()
	defer func() {
		w.cancel()
		<-w.done
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		w.mu.Lock()
		seen, err := w.seen, w.err
		w.mu.Unlock()
		gone := func(c corev1.Pod) bool {
			return slices.ContainsFunc(seen.deleted, func(d corev1.Pod) bool { return d.UID == c.UID })
		}
		if err != nil {
			t.Fatalf("watch verify pods: %v", err)
		}
		if !slices.ContainsFunc(seen.created, func(c corev1.Pod) bool { return !gone(c) }) || time.Now().After(deadline) {
			return seen
		}
		time.Sleep(200 * time.Millisecond)
	}
}
