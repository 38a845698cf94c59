package taint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
)

var (
	userTaint = corev1.Taint{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}
	gkeTaint  = corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
)

func node(name string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints}}
}

func getNode(t *testing.T, c kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node %s: %v", name, err)
	}
	return n
}

func taintStrings(taints []corev1.Taint) []string {
	out := make([]string, 0, len(taints))
	for _, t := range taints {
		out = append(out, t.ToString())
	}
	sort.Strings(out)
	return out
}

func assertTaints(t *testing.T, c kubernetes.Interface, name string, want ...corev1.Taint) {
	t.Helper()
	got := taintStrings(getNode(t, c, name).Spec.Taints)
	if w := taintStrings(want); !slices.Equal(got, w) {
		t.Errorf("node %s taints = %v, want %v", name, got, w)
	}
}

// writes counts the patch and update actions on nodes since the fake was created.
func writes(c *fake.Clientset) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetResource().Resource == "nodes" && (a.GetVerb() == "patch" || a.GetVerb() == "update") {
			n++
		}
	}
	return n
}

func actions(r Result) map[string]Action {
	out := make(map[string]Action, len(r.Nodes))
	for _, n := range r.Nodes {
		out[n.Node] = n.Action
	}
	return out
}

func TestTaintRun(t *testing.T) {
	tests := []struct {
		name        string
		nodes       []*corev1.Node
		run         []string
		wantActions map[string]Action
		wantTaints  map[string][]corev1.Taint
		wantAdded   map[string][]corev1.Taint // nil entry: no annotation
		wantErr     bool
	}{
		{
			name:        "untainted GPU nodes get the GPU taint and a record of it",
			nodes:       []*corev1.Node{node("gpu-1"), node("gpu-2")},
			run:         []string{"gpu-1", "gpu-2"},
			wantActions: map[string]Action{"gpu-1": ActionAdded, "gpu-2": ActionAdded},
			wantTaints:  map[string][]corev1.Taint{"gpu-1": {GPUTaint}, "gpu-2": {GPUTaint}},
			wantAdded:   map[string][]corev1.Taint{"gpu-1": {GPUTaint}, "gpu-2": {GPUTaint}},
		},
		{
			name:        "a user's taint stays and ours is added beside it",
			nodes:       []*corev1.Node{node("gpu-1", userTaint)},
			run:         []string{"gpu-1"},
			wantActions: map[string]Action{"gpu-1": ActionAdded},
			wantTaints:  map[string][]corev1.Taint{"gpu-1": {userTaint, GPUTaint}},
			wantAdded:   map[string][]corev1.Taint{"gpu-1": {GPUTaint}},
		},
		{
			name:        "GKE's own nvidia.com/gpu taint counts as present and is not recorded",
			nodes:       []*corev1.Node{node("gke-gpu", gkeTaint)},
			run:         []string{"gke-gpu"},
			wantActions: map[string]Action{"gke-gpu": ActionAlreadyPresent},
			wantTaints:  map[string][]corev1.Taint{"gke-gpu": {gkeTaint}},
			wantAdded:   map[string][]corev1.Taint{"gke-gpu": nil},
		},
		{
			name:        "an nvidia.com/gpu NoSchedule taint with another value counts as present",
			nodes:       []*corev1.Node{node("gpu-1", corev1.Taint{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule})},
			run:         []string{"gpu-1"},
			wantActions: map[string]Action{"gpu-1": ActionAlreadyPresent},
			wantTaints:  map[string][]corev1.Taint{"gpu-1": {{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
			wantAdded:   map[string][]corev1.Taint{"gpu-1": nil},
		},
		{
			name:        "an nvidia.com/gpu taint with another effect is a different taint, so ours is added",
			nodes:       []*corev1.Node{node("gpu-1", corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectPreferNoSchedule})},
			run:         []string{"gpu-1"},
			wantActions: map[string]Action{"gpu-1": ActionAdded},
			wantTaints: map[string][]corev1.Taint{"gpu-1": {
				{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectPreferNoSchedule}, GPUTaint,
			}},
			wantAdded: map[string][]corev1.Taint{"gpu-1": {GPUTaint}},
		},
		{
			name:        "a node that does not exist fails alone and the others are still tainted",
			nodes:       []*corev1.Node{node("gpu-1")},
			run:         []string{"gone", "gpu-1"},
			wantActions: map[string]Action{"gone": ActionFailed, "gpu-1": ActionAdded},
			wantTaints:  map[string][]corev1.Taint{"gpu-1": {GPUTaint}},
			wantErr:     true,
		},
		{
			name: "a node whose record was edited by hand is refused, not overwritten",
			nodes: []*corev1.Node{{
				ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Annotations: map[string]string{AddedTaintsAnnotation: "garbage"}},
			}},
			run:         []string{"gpu-1"},
			wantActions: map[string]Action{"gpu-1": ActionFailed},
			wantTaints:  map[string][]corev1.Taint{"gpu-1": nil},
			wantErr:     true,
		},
		{
			name:        "duplicate names are tainted once",
			nodes:       []*corev1.Node{node("gpu-1")},
			run:         []string{"gpu-1", "gpu-1"},
			wantActions: map[string]Action{"gpu-1": ActionAdded},
			wantTaints:  map[string][]corev1.Taint{"gpu-1": {GPUTaint}},
			wantAdded:   map[string][]corev1.Taint{"gpu-1": {GPUTaint}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := make([]runtime.Object, len(tt.nodes))
			for i, n := range tt.nodes {
				objs[i] = n
			}
			c := fake.NewClientset(objs...)
			var (
				mu      sync.Mutex
				reports []NodeResult
			)
			res, err := (&Taint{Client: c, OnNode: func(r NodeResult) {
				mu.Lock()
				defer mu.Unlock()
				reports = append(reports, r)
			}}).Run(context.Background(), tt.run)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Run() error = %v, wantErr %v", err, tt.wantErr)
			}
			if got := actions(res); !mapsEqual(got, tt.wantActions) {
				t.Errorf("actions = %v, want %v", got, tt.wantActions)
			}
			if len(reports) != len(res.Nodes) {
				t.Errorf("OnNode called %d times, want %d", len(reports), len(res.Nodes))
			}
			for name, want := range tt.wantTaints {
				assertTaints(t, c, name, want...)
			}
			for name, want := range tt.wantAdded {
				got, err := Added(getNode(t, c, name))
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(taintStrings(got), taintStrings(want)) {
					t.Errorf("node %s recorded %v, want %v", name, got, want)
				}
				if _, has := getNode(t, c, name).Annotations[AddedTaintsAnnotation]; has != (want != nil) {
					t.Errorf("node %s has annotation = %v, want %v", name, has, want != nil)
				}
			}
		})
	}
}

func mapsEqual(a, b map[string]Action) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestTaintIsIdempotent(t *testing.T) {
	t.Run("a second run finds the taint present and writes nothing", func(t *testing.T) {
		c := fake.NewClientset(node("gpu-1", userTaint), node("gpu-2"))
		tn := &Taint{Client: c}
		if _, err := tn.Run(context.Background(), []string{"gpu-1", "gpu-2"}); err != nil {
			t.Fatal(err)
		}
		before := writes(c)
		res, err := tn.Run(context.Background(), []string{"gpu-1", "gpu-2"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Count(ActionAlreadyPresent) != 2 || res.Changed() != 0 {
			t.Errorf("second run counts = %v, want 2 already-present and no changes", res.Counts)
		}
		if w := writes(c) - before; w != 0 {
			t.Errorf("second run wrote %d times, want 0", w)
		}
		assertTaints(t, c, "gpu-1", userTaint, GPUTaint)
	})
}

func TestUntaintRestoresOriginalTaints(t *testing.T) {
	tests := []struct {
		name        string
		nodes       []*corev1.Node
		taint       []string // nodes Taint.Run is given first
		untaint     []string // nil: every annotated node
		wantActions map[string]Action
		wantTaints  map[string][]corev1.Taint
	}{
		{
			name:        "untaint with no names finds every annotated node and removes only our taint",
			nodes:       []*corev1.Node{node("gpu-1", userTaint), node("gpu-2"), node("cpu-1", userTaint)},
			taint:       []string{"gpu-1", "gpu-2"},
			wantActions: map[string]Action{"gpu-1": ActionRemoved, "gpu-2": ActionRemoved},
			wantTaints:  map[string][]corev1.Taint{"gpu-1": {userTaint}, "gpu-2": nil, "cpu-1": {userTaint}},
		},
		{
			name:        "a GKE taint that was there before gpuctl survives untaint",
			nodes:       []*corev1.Node{node("gke-gpu", gkeTaint), node("gpu-2")},
			taint:       []string{"gke-gpu", "gpu-2"},
			untaint:     []string{"gke-gpu", "gpu-2"},
			wantActions: map[string]Action{"gke-gpu": ActionNothingToRemove, "gpu-2": ActionRemoved},
			wantTaints:  map[string][]corev1.Taint{"gke-gpu": {gkeTaint}, "gpu-2": nil},
		},
		{
			name:        "a node that no longer exists has nothing to remove",
			nodes:       []*corev1.Node{node("gpu-1")},
			taint:       []string{"gpu-1"},
			untaint:     []string{"gpu-1", "scaled-away"},
			wantActions: map[string]Action{"gpu-1": ActionRemoved, "scaled-away": ActionNothingToRemove},
			wantTaints:  map[string][]corev1.Taint{"gpu-1": nil},
		},
		{
			name: "a recorded taint whose value a user changed is theirs now and stays",
			nodes: []*corev1.Node{{
				ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Annotations: map[string]string{
					AddedTaintsAnnotation: `[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}]`,
				}},
				Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "reserved", Effect: corev1.TaintEffectNoSchedule}}},
			}},
			untaint:     []string{"gpu-1"},
			wantActions: map[string]Action{"gpu-1": ActionNothingToRemove},
			wantTaints:  map[string][]corev1.Taint{"gpu-1": {{Key: "nvidia.com/gpu", Value: "reserved", Effect: corev1.TaintEffectNoSchedule}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := make([]runtime.Object, len(tt.nodes))
			for i, n := range tt.nodes {
				objs[i] = n
			}
			c := fake.NewClientset(objs...)
			if tt.taint != nil {
				if _, err := (&Taint{Client: c}).Run(context.Background(), tt.taint); err != nil {
					t.Fatal(err)
				}
			}
			res, err := (&Untaint{Client: c}).Run(context.Background(), tt.untaint)
			if err != nil {
				t.Fatal(err)
			}
			if got := actions(res); !mapsEqual(got, tt.wantActions) {
				t.Errorf("actions = %v, want %v", got, tt.wantActions)
			}
			for name, want := range tt.wantTaints {
				assertTaints(t, c, name, want...)
				if _, has := getNode(t, c, name).Annotations[AddedTaintsAnnotation]; has {
					t.Errorf("node %s still has %s after untaint", name, AddedTaintsAnnotation)
				}
			}
			again, err := (&Untaint{Client: c}).Run(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(again.Nodes) != 0 {
				t.Errorf("a second untaint found %v, want no annotated nodes", again.Nodes)
			}
		})
	}
}

func TestUntaintRefusesABrokenRecord(t *testing.T) {
	t.Run("a node whose record is not JSON keeps its taints and reports an error", func(t *testing.T) {
		n := node("gpu-1", GPUTaint)
		n.Annotations = map[string]string{AddedTaintsAnnotation: "{"}
		c := fake.NewClientset(n)
		res, err := (&Untaint{Client: c}).Run(context.Background(), nil)
		if err == nil {
			t.Fatal("Run() succeeded, want an error for the broken annotation")
		}
		if res.Count(ActionFailed) != 1 {
			t.Errorf("counts = %v, want one failed", res.Counts)
		}
		assertTaints(t, c, "gpu-1", GPUTaint)
		if writes(c) != 0 {
			t.Errorf("wrote %d times, want 0", writes(c))
		}
	})
}

func TestRunRetriesOnConflict(t *testing.T) {
	otherTaint := corev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoSchedule}
	t.Run("a concurrent writer's taint survives when our patch conflicts and is retried", func(t *testing.T) {
		c := fake.NewClientset(node("gpu-1"))
		var conflicts atomic.Int32
		c.PrependReactor("patch", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
			if conflicts.Add(1) > 1 {
				return false, nil, nil // let the tracker apply it
			}
			// Another controller writes the node between our LIST and our patch…
			n, err := c.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", "gpu-1")
			if err != nil {
				return true, nil, err
			}
			n = n.DeepCopyObject()
			n.(*corev1.Node).Spec.Taints = append(n.(*corev1.Node).Spec.Taints, otherTaint)
			if err := c.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, n, ""); err != nil {
				return true, nil, err
			}
			// …so the API server rejects our patch, whose resourceVersion is now stale.
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "gpu-1", errors.New("the object has been modified"))
		})
		res, err := (&Taint{Client: c}).Run(context.Background(), []string{"gpu-1"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Count(ActionAdded) != 1 {
			t.Errorf("counts = %v, want one added", res.Counts)
		}
		if got := conflicts.Load(); got != 2 {
			t.Errorf("patched %d times, want 2 (one conflict, one retry)", got)
		}
		gets := 0
		for _, a := range c.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "nodes" {
				gets++
			}
		}
		if gets != 1 {
			t.Errorf("re-read the node %d times, want exactly 1 (after the conflict)", gets)
		}
		assertTaints(t, c, "gpu-1", otherTaint, GPUTaint)
	})

	t.Run("the patch is a JSON patch conditional on the taints and the annotation as read", func(t *testing.T) {
		n := node("gpu-1", otherTaint)
		n.Annotations = map[string]string{"other": "x"}
		c := fake.NewClientset(n)
		var body string
		c.PrependReactor("patch", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
			p := action.(k8stesting.PatchAction)
			if p.GetPatchType() != types.JSONPatchType {
				t.Errorf("patch type = %s, want %s", p.GetPatchType(), types.JSONPatchType)
			}
			body = string(p.GetPatch())
			return false, nil, nil
		})
		if _, err := (&Taint{Client: c}).Run(context.Background(), []string{"gpu-1"}); err != nil {
			t.Fatal(err)
		}
		want := `[{"op":"test","path":"/spec/taints","value":[{"key":"node.kubernetes.io/unreachable","effect":"NoSchedule"}]},` +
			`{"op":"test","path":"/metadata/annotations/gpuctl.io~1added-taints","value":null},` +
			`{"op":"add","path":"/spec/taints","value":[{"key":"node.kubernetes.io/unreachable","effect":"NoSchedule"},{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}]},` +
			`{"op":"add","path":"/metadata/annotations/gpuctl.io~1added-taints","value":"[{\"key\":\"nvidia.com/gpu\",\"value\":\"present\",\"effect\":\"NoSchedule\"}]"}]`
		if body != want {
			t.Errorf("patch = %s\nwant    %s", body, want)
		}
		if got := getNode(t, c, "gpu-1").Annotations["other"]; got != "x" {
			t.Errorf("another annotation became %q", got)
		}
	})

	// The tracker applies JSON patches as the API server does (gopkg.in/evanphx/json-patch.v4): these
	// two cases run the real test operations.
	t.Run("a taint another writer added since the read fails the patch's test; the retry keeps it", func(t *testing.T) {
		c := fake.NewClientset(node("gpu-1"))
		patches := onFirstPatch(t, c, func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{otherTaint}
		})
		if _, err := (&Taint{Client: c}).Run(context.Background(), []string{"gpu-1"}); err != nil {
			t.Fatal(err)
		}
		if got := patches.Load(); got != 2 {
			t.Errorf("patched %d times, want 2 (a failed test, then a retry on the node as re-read)", got)
		}
		assertTaints(t, c, "gpu-1", otherTaint, GPUTaint)
	})
	t.Run("a failed test is retried even when the node is back as read (a taint that came and went)", func(t *testing.T) {
		c := fake.NewClientset(node("gpu-1"))
		var patches atomic.Int32
		c.PrependReactor("patch", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
			if patches.Add(1) > 1 {
				return false, nil, nil
			}
			// What the API server answers to a JSON patch whose test failed.
			err := apierrors.NewGenericServerResponse(422, "patch", schema.GroupResource{Resource: "nodes"}, "gpu-1", "testing value /spec/taints failed: test failed", 0, false)
			return true, nil, err
		})
		if _, err := (&Taint{Client: c}).Run(context.Background(), []string{"gpu-1"}); err != nil {
			t.Fatal(err)
		}
		if got := patches.Load(); got != 2 {
			t.Errorf("patched %d times, want 2", got)
		}
		assertTaints(t, c, "gpu-1", GPUTaint)
	})
	t.Run("a patch refused on a node that did not change is an error, not retried", func(t *testing.T) {
		c := fake.NewClientset(node("gpu-1"))
		var patches atomic.Int32
		c.PrependReactor("patch", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
			patches.Add(1)
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, "gpu-1", field.ErrorList{field.Invalid(field.NewPath("spec", "taints").Index(0).Child("effect"), "Sometimes", "not a taint effect")})
		})
		if _, err := (&Taint{Client: c}).Run(context.Background(), []string{"gpu-1"}); err == nil || errors.Is(err, errChanged) {
			t.Errorf("err = %v, want the API server's refusal", err)
		}
		if got := patches.Load(); got != 1 {
			t.Errorf("patched %d times, want 1", got)
		}
	})
	t.Run("a node read without annotations that has some by the patch is planned again", func(t *testing.T) {
		c := fake.NewClientset(node("gpu-1"))
		patches := onFirstPatch(t, c, func(n *corev1.Node) {
			n.Annotations = map[string]string{"node.alpha.kubernetes.io/ttl": "0"}
		})
		if _, err := (&Taint{Client: c}).Run(context.Background(), []string{"gpu-1"}); err != nil {
			t.Fatal(err)
		}
		n := getNode(t, c, "gpu-1")
		if patches.Load() != 2 || n.Annotations["node.alpha.kubernetes.io/ttl"] != "0" || n.Annotations[AddedTaintsAnnotation] == "" {
			t.Errorf("patched %d times; annotations %v", patches.Load(), n.Annotations)
		}
		assertTaints(t, c, "gpu-1", GPUTaint)
	})
	t.Run("a change to anything else since the read (node status, labels) costs no retry", func(t *testing.T) {
		c := fake.NewClientset(node("gpu-1"))
		patches := onFirstPatch(t, c, func(n *corev1.Node) {
			n.Labels = map[string]string{"heartbeat": "1"}
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		})
		if _, err := (&Taint{Client: c}).Run(context.Background(), []string{"gpu-1"}); err != nil {
			t.Fatal(err)
		}
		if got := patches.Load(); got != 1 {
			t.Errorf("patched %d times, want 1", got)
		}
		n := getNode(t, c, "gpu-1")
		if n.Labels["heartbeat"] != "1" {
			t.Error("the other writer's change was lost")
		}
		assertTaints(t, c, "gpu-1", GPUTaint)
	})
}

func TestDryRunWritesNothing(t *testing.T) {
	tests := []struct {
		name       string
		run        func(c *fake.Clientset) (Result, error)
		wantAction Action
	}{
		{
			name: "a dry-run taint reports would-add and writes nothing",
			run: func(c *fake.Clientset) (Result, error) {
				return (&Taint{Client: c, DryRun: true}).Run(context.Background(), []string{"gpu-1"})
			},
			wantAction: ActionWouldAdd,
		},
		{
			name: "a dry-run untaint reports would-remove and writes nothing",
			run: func(c *fake.Clientset) (Result, error) {
				if _, err := (&Taint{Client: c}).Run(context.Background(), []string{"gpu-1"}); err != nil {
					return Result{}, err
				}
				c.ClearActions()
				return (&Untaint{Client: c, DryRun: true}).Run(context.Background(), nil)
			},
			wantAction: ActionWouldRemove,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientset(node("gpu-1", userTaint))
			before := taintStrings(getNode(t, c, "gpu-1").Spec.Taints)
			c.ClearActions()
			res, err := tt.run(c)
			if err != nil {
				t.Fatal(err)
			}
			if got := actions(res)["gpu-1"]; got != tt.wantAction {
				t.Errorf("action = %s, want %s", got, tt.wantAction)
			}
			if w := writes(c); w != 0 {
				t.Errorf("dry run wrote %d times, want 0", w)
			}
			if tt.wantAction == ActionWouldAdd {
				if after := taintStrings(getNode(t, c, "gpu-1").Spec.Taints); !slices.Equal(after, before) {
					t.Errorf("taints changed from %v to %v", before, after)
				}
			}
		})
	}
}

// slowNodes wraps a clientset so node patches take a while and run truly in parallel (the fake itself serialises
// every call under one lock), and records how many are in flight at once.
type slowNodes struct {
	kubernetes.Interface
	inFlight, max atomic.Int32
}

func (s *slowNodes) CoreV1() typedcorev1.CoreV1Interface { return slowCore{s.Interface.CoreV1(), s} }

// IsWatchListSemanticsUnSupported passes on what the fake tells client-go's informers: it cannot
// stream a list, so they list and then watch.
func (s *slowNodes) IsWatchListSemanticsUnSupported() bool { return true }

type slowCore struct {
	typedcorev1.CoreV1Interface
	s *slowNodes
}

func (c slowCore) Nodes() typedcorev1.NodeInterface {
	return slowNodeClient{c.CoreV1Interface.Nodes(), c.s}
}

type slowNodeClient struct {
	typedcorev1.NodeInterface
	s *slowNodes
}

func (n slowNodeClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*corev1.Node, error) {
	cur := n.s.inFlight.Add(1)
	defer n.s.inFlight.Add(-1)
	for {
		m := n.s.max.Load()
		if cur <= m || n.s.max.CompareAndSwap(m, cur) {
			break
		}
	}
	select {
	case <-time.After(20 * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return n.NodeInterface.Patch(ctx, name, pt, data, opts, sub...)
}

func TestConcurrencyIsBounded(t *testing.T) {
	tests := []struct {
		name        string
		concurrency int
		wantMax     int32
	}{
		{name: "patches run in parallel but never more than the limit of 3", concurrency: 3, wantMax: 3},
		{name: "the default limit is 64", concurrency: 0, wantMax: 64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			var names []string
			// Twice the limit, so a runner that ignored it would exceed it.
			for i := range 2 * tt.wantMax {
				name := fmt.Sprintf("gpu-%03d", i)
				objs = append(objs, node(name))
				names = append(names, name)
			}
			c := &slowNodes{Interface: fake.NewClientset(objs...)}
			res, err := (&Taint{Client: c, Concurrency: tt.concurrency}).Run(context.Background(), names)
			if err != nil {
				t.Fatal(err)
			}
			if res.Count(ActionAdded) != len(names) {
				t.Errorf("counts = %v, want %d added", res.Counts, len(names))
			}
			if got := c.max.Load(); got > tt.wantMax || got < 2 {
				t.Errorf("max patches in flight = %d, want between 2 and %d", got, tt.wantMax)
			}
			for i, r := range res.Nodes {
				if r.Node != names[i] {
					t.Errorf("result %d is for %s, want %s (input order)", i, r.Node, names[i])
				}
			}
		})
	}
}

// onFirstPatch makes another writer change node gpu-1 (mutate) just before gpuctl's first patch lands,
// then lets the tracker apply every patch (JSON patch tests included); it returns the patch count.
func onFirstPatch(t *testing.T, c *fake.Clientset, mutate func(*corev1.Node)) *atomic.Int32 {
	t.Helper()
	var patches atomic.Int32
	c.PrependReactor("patch", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if patches.Add(1) == 1 {
			n, err := c.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", "gpu-1")
			if err != nil {
				return true, nil, err
			}
			n = n.DeepCopyObject()
			mutate(n.(*corev1.Node))
			if err := c.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, n, ""); err != nil {
				return true, nil, err
			}
		}
		return false, nil, nil
	})
	return &patches
}
