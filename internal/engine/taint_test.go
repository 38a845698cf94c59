package engine

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/runner"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// nodePatches names the nodes patched since the fake was created.
func nodePatches(cs *fake.Clientset) []string {
	var out []string
	for _, a := range cs.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && a.GetResource().Resource == "nodes" {
			out = append(out, p.GetName())
		}
	}
	return out
}

// taintedNodes names the nodes that carry the GPU taint now.
func taintedNodes(t *testing.T, c *kube.Clients) []string {
	t.Helper()
	list, err := c.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range list.Items {
		if slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == taint.GPUTaint.Key }) {
			out = append(out, n.Name)
		}
	}
	return out
}

// A dry run writes nothing and lists what the run then does, and the run's result lists the same.
func TestTaintAndUntaintDoWhatTheDryRunLists(t *testing.T) {
	ctx := context.Background()
	c := checkCluster(nil)
	cs := c.Kube.(*fake.Clientset)

	dry, err := (&TaintNodes{Clients: c, DryRun: true}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []plan.NodeChange{{Node: "gpu-1", Action: plan.ActionAdd, Taints: []plan.TaintSpec{{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}}}}
	if !dry.DryRun || !reflect.DeepEqual(dry.Plan.Changes, want) || len(dry.Done) != 0 {
		t.Fatalf("dry run: %+v", dry)
	}
	if got := []plan.NodeUnchanged{{Node: "cp-1", Reason: plan.ReasonNotGPU}, {Node: "cpu-1", Reason: plan.ReasonNotGPU}}; !reflect.DeepEqual(dry.Plan.Unchanged, got) {
		t.Errorf("left alone %+v", dry.Plan.Unchanged)
	}
	// kubeadm 1.37 with a CPU worker and no operator yet: nothing adds the toleration, so install would
	// not taint; gpuctl taint does, and says so.
	if dry.Plan.Toleration != "" || dry.Plan.PodToleration == "" || len(dry.Plan.Warnings) != 1 || !strings.Contains(dry.Plan.Warnings[0], "not in force") {
		t.Errorf("toleration %q, pod toleration %q, warnings %q", dry.Plan.Toleration, dry.Plan.PodToleration, dry.Plan.Warnings)
	}
	if p := nodePatches(cs); len(p) != 0 {
		t.Fatalf("the dry run patched %v", p)
	}

	run, err := (&TaintNodes{Clients: c}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(run.Done, dry.Plan.Changes) || len(run.NotDone) != 0 {
		t.Errorf("done %+v, not done %+v; the dry run listed %+v", run.Done, run.NotDone, dry.Plan.Changes)
	}
	if got := taintedNodes(t, c); !reflect.DeepEqual(got, []string{"gpu-1"}) || !reflect.DeepEqual(nodePatches(cs), []string{"gpu-1"}) {
		t.Errorf("tainted %v, patched %v", got, nodePatches(cs))
	}

	udry, err := (&UntaintNodes{Clients: c, DryRun: true}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	uwant := []plan.NodeChange{{Node: "gpu-1", Action: plan.ActionRemove, Taints: want[0].Taints}}
	if !reflect.DeepEqual(udry.Plan.Changes, uwant) || len(nodePatches(cs)) != 1 {
		t.Fatalf("untaint dry run %+v, patches %v", udry.Plan, nodePatches(cs))
	}
	urun, err := (&UntaintNodes{Clients: c}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(urun.Done, uwant) || len(taintedNodes(t, c)) != 0 {
		t.Errorf("untaint done %+v, tainted %v", urun.Done, taintedNodes(t, c))
	}
}

func TestTaintJudgedAsInstallJudgesIt(t *testing.T) {
	ctx := context.Background()
	pinned := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "pinned"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"feature.node.kubernetes.io/pci-10de.present": "true"}}}}}

	t.Run("a workload the taint would strand refuses it before any node is written, exit 5's error", func(t *testing.T) {
		c := checkCluster(nil, pinned)
		res, err := (&TaintNodes{Clients: c}).Run(ctx)
		var se *StrandedError
		if !errors.As(err, &se) || !errors.Is(err, preflight.ErrFailed) {
			t.Fatalf("err = %v, want a StrandedError", err)
		}
		for _, want := range []string{"Deployment web/pinned", "--force", "{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not name %q", err, want)
			}
		}
		if res == nil || len(res.Plan.Stranded()) != 1 || len(res.Done) != 0 {
			t.Errorf("result %+v", res)
		}
		if p := nodePatches(c.Kube.(*fake.Clientset)); len(p) != 0 {
			t.Errorf("a refused taint patched %v", p)
		}
	})

	t.Run("--force taints anyway, and the plan still names the workload", func(t *testing.T) {
		c := checkCluster(nil, pinned)
		res, err := (&TaintNodes{Clients: c, Force: true}).Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Plan.Forced || len(res.Plan.Stranded()) != 1 || !reflect.DeepEqual(taintedNodes(t, c), []string{"gpu-1"}) {
			t.Errorf("plan %+v, tainted %v", res.Plan, taintedNodes(t, c))
		}
	})

	t.Run("gpuctl's policy in force gives GPU pods the toleration: no warning", func(t *testing.T) {
		c := checkCluster(nil)
		cs := c.Kube.(*fake.Clientset)
		cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).DeepCopy()
			if _, probe := p.Labels[detect.ProbeLabel]; !probe {
				p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
			}
			return true, p, nil
		})
		res, err := (&TaintNodes{Clients: c, DryRun: true}).Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Plan.Toleration != plan.TolerationPolicy || len(res.Plan.Warnings) != 0 || res.Plan.PodToleration != "" {
			t.Errorf("toleration %q, warnings %q, pod toleration %q", res.Plan.Toleration, res.Plan.Warnings, res.Plan.PodToleration)
		}
	})

	t.Run("no GPU node: nothing to taint, an error", func(t *testing.T) {
		cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-1"}})
		_, err := (&TaintNodes{Clients: &kube.Clients{Kube: cs, Discovery: cs.Discovery(), Namespace: "gpu-operator"}, DryRun: true}).Run(ctx)
		if err == nil || !strings.Contains(err.Error(), "no GPU nodes found") {
			t.Errorf("err = %v", err)
		}
	})
}

// An interrupt while the nodes are written ends the run with a *runner.InterruptedError whose
// in-flight step reads back how many planned nodes carry the change: the one written before the
// interrupt, none after.
func TestTaintAndUntaintInterrupted(t *testing.T) {
	gpu := func(name string, tainted bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"feature.node.kubernetes.io/pci-10de.present": "true"}},
			Status: corev1.NodeStatus{Capacity: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}
		if tainted {
			n.Spec.Taints = []corev1.Taint{taint.GPUTaint}
			n.Annotations = map[string]string{taint.AddedTaintsAnnotation: `[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}]`}
		}
		return n
	}
	for _, tc := range []struct {
		verb    string
		tainted bool
		run     func(ctx context.Context, c *kube.Clients) (*TaintResult, error)
		state   string
		resume  string
	}{
		{verb: "taint", run: func(ctx context.Context, c *kube.Clients) (*TaintResult, error) {
			return (&TaintNodes{Clients: c}).Run(ctx)
		}, state: "1/3 planned nodes tainted nvidia.com/gpu=present:NoSchedule", resume: "gpuctl taint again"},
		{verb: "untaint", tainted: true, run: func(ctx context.Context, c *kube.Clients) (*TaintResult, error) {
			return (&UntaintNodes{Clients: c}).Run(ctx)
		}, state: "1/3 planned nodes no longer carry gpuctl's taint", resume: "gpuctl untaint again"},
	} {
		t.Run(tc.verb, func(t *testing.T) {
			c := checkCluster(nil, gpu("gpu-2", tc.tainted), gpu("gpu-3", tc.tainted))
			cs := c.Kube.(*fake.Clientset)
			if tc.tainted {
				n, _ := cs.CoreV1().Nodes().Get(t.Context(), "gpu-1", metav1.GetOptions{})
				t1 := gpu("gpu-1", true)
				n.Spec.Taints, n.Annotations = t1.Spec.Taints, t1.Annotations
				if _, err := cs.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			// Ctrl-C during the first node's write; the API server refuses the writes of a cancelled
			// client from then on (the fake does not look at the context).
			cs.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				if ctx.Err() != nil {
					return true, nil, ctx.Err()
				}
				cancel()
				return false, nil, nil
			})
			res, err := tc.run(ctx, c)
			var ie *runner.InterruptedError
			if !errors.As(err, &ie) {
				t.Fatalf("err = %v, want a *runner.InterruptedError", err)
			}
			if ie.InFlight == nil || ie.InFlight.ID != tc.verb || ie.InFlight.Message != tc.state || ie.Count != 1 {
				t.Errorf("in flight %+v of %d, want step %s with %q", ie.InFlight, ie.Count, tc.verb, tc.state)
			}
			if !strings.Contains(ie.Resume, tc.resume) {
				t.Errorf("resume %q", ie.Resume)
			}
			if res == nil || len(res.Done) != 1 || len(res.NotDone) != 2 || len(res.Steps) != 1 || res.Steps[0].Outcome != event.StepInterrupted || res.Interrupted != ie {
				t.Errorf("result %+v", res)
			}
			for _, n := range res.NotDone {
				if n.Reason != "not written: the run stopped first" {
					t.Errorf("not done %+v", n)
				}
			}
			want := 1
			if tc.tainted {
				want = 2
			}
			if got := taintedNodes(t, c); len(got) != want {
				t.Errorf("tainted now: %v", got)
			}
		})
	}
}

// An interrupt before the first write (here while taint detects the cluster) says nothing was changed.
func TestTaintInterruptedBeforeTheFirstWrite(t *testing.T) {
	c := checkCluster(nil)
	cs := c.Kube.(*fake.Clientset)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cs.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		cancel()
		return true, nil, ctx.Err()
	})
	_, err := (&TaintNodes{Clients: c}).Run(ctx)
	var ie *runner.InterruptedError
	if !errors.As(err, &ie) || !ie.BeforeFirstWrite {
		t.Fatalf("err = %v, want an interrupt before the first write", err)
	}
	if p := nodePatches(cs); len(p) != 0 {
		t.Errorf("patched %v", p)
	}
}
