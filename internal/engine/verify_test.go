package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// kubelet is what the fake cluster's scheduler and kubelet do with a verify pod created for a node.
type kubelet func(p *corev1.Pod)

var (
	succeeds kubelet = func(p *corev1.Pod) {
		p.Spec.NodeName = p.Annotations[verifyNodeAnno]
		p.Status.Phase = corev1.PodSucceeded
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: verifyContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}
	}
	fails kubelet = func(p *corev1.Pod) {
		p.Spec.NodeName = p.Annotations[verifyNodeAnno]
		p.Status.Phase = corev1.PodFailed
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: verifyContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "no CUDA-capable device is detected"}}}}
	}
	unschedulable kubelet = func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't match Pod's node affinity/selector."}}
	}
	pending kubelet = func(p *corev1.Pod) {
		p.Spec.NodeName = p.Annotations[verifyNodeAnno]
		p.Status.Phase = corev1.PodPending
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: verifyContainer, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
	}
)

func gpuNode(name string, extra map[string]string) *corev1.Node {
	l := map[string]string{health.GPUPresentLabel: "true", "kubernetes.io/hostname": name}
	for k, v := range extra {
		l[k] = v
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

// verifyCluster is a fake cluster with an install record in gpu-operator, the given nodes and objects,
// and a "kubelet" that gives each verify pod the state behaviour names for its node.
func verifyCluster(t *testing.T, behaviour map[string]kubelet, objs ...runtime.Object) *fake.Clientset {
	t.Helper()
	kc := fake.NewClientset(objs...)
	if err := record.Write(t.Context(), kc, &record.Record{Namespace: "gpu-operator"}); err != nil {
		t.Fatal(err)
	}
	uids := 0
	kc.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		// As the API server does: every object gets a UID of its own.
		uids++
		p.UID = types.UID(fmt.Sprintf("uid-%d-%s", uids, p.Name))
		if b := behaviour[p.Annotations[verifyNodeAnno]]; b != nil {
			b(p)
		}
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "" {
			ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: p.Name + ".1", Namespace: p.Namespace},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: p.Name, Namespace: p.Namespace, UID: p.UID}, Type: "Warning", Reason: "Seen", Message: "event of " + p.Name}
			if err := kc.Tracker().Add(ev); err != nil {
				t.Error(err)
			}
		}
		return false, nil, nil
	})
	// The caller may do anything (denyAccess takes permissions away).
	kc.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		r.Status.Allowed = true
		return true, r, nil
	})
	// The fake's tracker ignores preconditions; the API server refuses a delete whose UID differs.
	kc.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		pre := d.GetDeleteOptions().Preconditions
		if pre == nil || pre.UID == nil {
			return false, nil, nil
		}
		o, err := kc.Tracker().Get(a.GetResource(), a.GetNamespace(), d.GetName())
		if err != nil {
			return true, nil, err
		}
		if uid := o.(*corev1.Pod).UID; uid != *pre.UID {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), d.GetName(), fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *pre.UID, uid))
		}
		return false, nil, nil
	})
	return kc
}

// denyAccess makes the API server's authorizer refuse verb on resource (in any namespace), as RBAC
// would: the SelfSubjectAccessReview says no, and so does the request.
func denyAccess(kc *fake.Clientset, verb, resource string) {
	kc.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		// Nor may the caller do everything.
		if ra := r.Spec.ResourceAttributes; ra != nil && (ra.Verb == verb && ra.Resource == resource || ra.Verb == "*") {
			return true, r, nil
		}
		return false, nil, nil
	})
	kc.PrependReactor(verb, resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), "", fmt.Errorf("the user may not %s %s", verb, resource))
	})
}

func verifyPodsLeft(t *testing.T, kc *fake.Clientset) []string {
	t.Helper()
	list, err := kc.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{LabelSelector: VerifyNameLabel + "=" + plan.VerifyName})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names
}

func TestVerify(t *testing.T) {
	leftover := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gpuctl-verify-gpu-1-ffffff", Namespace: "gpu-operator", UID: "uid-leftover",
		Labels: map[string]string{VerifyNameLabel: plan.VerifyName, managedByLabel: "gpuctl", VerifyRunLabel: "ffffff"}}}
	for _, tc := range []struct {
		name      string
		nodes     []runtime.Object
		behaviour map[string]kubelet
		opts      VerifyOptions
		wantErr   error
		want      map[string]VerifyOutcome
		reasons   map[string]string
		earlier   int
	}{
		{
			name:      "every GPU node runs the workload, and an earlier run's leftover is removed first",
			nodes:     []runtime.Object{gpuNode("gpu-1", nil), gpuNode("gpu-2", nil), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-1"}}, leftover},
			behaviour: map[string]kubelet{"gpu-1": succeeds, "gpu-2": succeeds},
			want:      map[string]VerifyOutcome{"gpu-1": VerifyPassed, "gpu-2": VerifyPassed},
			earlier:   1,
		},
		{
			name:      "a failed workload, an unschedulable one and one that never starts are each named with their reason",
			nodes:     []runtime.Object{gpuNode("gpu-1", nil), gpuNode("gpu-2", nil), gpuNode("gpu-3", nil), gpuNode("gpu-4", nil)},
			behaviour: map[string]kubelet{"gpu-1": succeeds, "gpu-2": fails, "gpu-3": unschedulable, "gpu-4": pending},
			opts:      VerifyOptions{Timeout: 200 * time.Millisecond},
			wantErr:   ErrVerifyFailed,
			want:      map[string]VerifyOutcome{"gpu-1": VerifyPassed, "gpu-2": VerifyFailed, "gpu-3": VerifyUnschedulable, "gpu-4": VerifyTimeout},
			reasons: map[string]string{"gpu-2": "container vectoradd exited with code 1 (Error): no CUDA-capable device is detected",
				"gpu-3": "0/3 nodes are available: 1 node(s) were unschedulable", "gpu-4": "ContainerCreating"},
		},
		{
			name:      "--nodes narrows the GPU nodes",
			nodes:     []runtime.Object{gpuNode("gpu-1", map[string]string{"pool": "a"}), gpuNode("gpu-2", map[string]string{"pool": "b"})},
			behaviour: map[string]kubelet{"gpu-1": succeeds, "gpu-2": fails},
			opts:      VerifyOptions{Nodes: "pool=a"},
			want:      map[string]VerifyOutcome{"gpu-1": VerifyPassed},
		},
		{
			name:    "a selector that matches no GPU node is an input mistake",
			nodes:   []runtime.Object{gpuNode("gpu-1", nil)},
			opts:    VerifyOptions{Nodes: "pool=none"},
			wantErr: plan.ErrInput,
		},
		{
			name:    "a selector that does not parse is an input mistake",
			nodes:   []runtime.Object{gpuNode("gpu-1", nil)},
			opts:    VerifyOptions{Nodes: "pool in (a"},
			wantErr: plan.ErrInput,
		},
		{
			name:    "without a node labelled a GPU node there is nothing to verify",
			nodes:   []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-1"}}},
			wantErr: ErrNoLabelledGPUNodes,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := verifyCluster(t, tc.behaviour, tc.nodes...)
			var mu sync.Mutex
			var events []event.Event
			v := &Verify{Clients: &kube.Clients{Kube: kc, Namespace: "gpu-operator"}, Options: tc.opts,
				Sink: event.SinkFunc(func(e event.Event) { mu.Lock(); events = append(events, e); mu.Unlock() })}
			res, err := v.Run(t.Context())
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			// The verdict is the run's answer, not a step's failure: its line says just that.
			if tc.wantErr == ErrVerifyFailed && !strings.HasPrefix(err.Error(), "GPU verification failed: ") {
				t.Errorf("err = %q", err)
			}
			if left := verifyPodsLeft(t, kc); len(left) > 0 {
				t.Errorf("verify left pods behind: %v", left)
			}
			if tc.want == nil {
				if res != nil {
					t.Errorf("a refused run returned a result: %+v", res)
				}
				for _, a := range kc.Actions() {
					if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
						t.Errorf("a refused run created a pod")
					}
				}
				return
			}
			got := map[string]VerifyOutcome{}
			for _, n := range res.Nodes {
				got[n.Node] = n.Outcome
				if want := tc.reasons[n.Node]; !strings.Contains(n.Reason, want) {
					t.Errorf("%s: reason %q, want it to contain %q", n.Node, n.Reason, want)
				}
				if n.Outcome == VerifyFailed && len(n.Logs) == 0 {
					t.Errorf("%s failed without its log lines", n.Node)
				}
				if (n.Outcome == VerifyFailed || n.Outcome == VerifyUnschedulable) && !strings.Contains(strings.Join(n.Events, "\n"), "event of "+n.Pod) {
					t.Errorf("%s: events %v lack the pod's event", n.Node, n.Events)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("outcomes %v, want %v", got, tc.want)
			}
			for n, w := range tc.want {
				if got[n] != w {
					t.Errorf("%s: %s, want %s", n, got[n], w)
				}
			}
			if res.Passed != (tc.wantErr == nil) {
				t.Errorf("passed = %v with err %v", res.Passed, err)
			}
			if len(res.Removed) != len(tc.want) || len(res.RemovedEarlier) != tc.earlier {
				t.Errorf("removed %v and earlier %v; want %d and %d", res.Removed, res.RemovedEarlier, len(tc.want), tc.earlier)
			}
			if !reflect.DeepEqual(res.Done, res.Plan) {
				t.Errorf("the run did %+v, planned %+v", res.Done, res.Plan)
			}
			// The plan's steps, then the deletion of the run's pods; the wait fails with a node.
			var outcomes []string
			for _, s := range res.Steps {
				outcomes = append(outcomes, s.ID+":"+string(s.Outcome))
			}
			earlier, wait := "delete-earlier:skipped", "wait:succeeded"
			if tc.earlier > 0 {
				earlier = "delete-earlier:succeeded"
			}
			if tc.wantErr != nil {
				wait = "wait:failed"
			}
			if want := []string{earlier, "create:succeeded", wait, "delete:succeeded"}; !slices.Equal(outcomes, want) {
				t.Errorf("steps %v, want %v", outcomes, want)
			}
		})
	}
}

// An interrupt while the workloads run still removes them, and the run ends as interrupted.
func TestVerifyInterruptRemovesThePods(t *testing.T) {
	kc := verifyCluster(t, map[string]kubelet{"gpu-1": pending, "gpu-2": pending}, gpuNode("gpu-1", nil), gpuNode("gpu-2", nil))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	v := &Verify{Clients: &kube.Clients{Kube: kc, Namespace: "gpu-operator"}, Sink: event.SinkFunc(func(e event.Event) {
		// Ctrl-C once the wait has seen both pods waiting.
		if e.Type == event.StepProgress && e.Step == "wait" && len(e.Pending) == 2 && strings.Contains(e.Message, "gpu-2") {
			cancel()
		}
	})}
	res, err := v.Run(ctx)
	var ie *runner.InterruptedError
	if !errors.As(err, &ie) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a *runner.InterruptedError", err)
	}
	// Nothing earlier to delete (skipped), the pods created, the wait in flight; its state names
	// what it last saw.
	if ie.InFlight == nil || ie.InFlight.ID != "wait" || !strings.Contains(ie.InFlight.Message, "gpu-2") {
		t.Errorf("in flight %+v, want the wait, with what it last saw", ie.InFlight)
	}
	if got := stepIDs(ie.Finished); !slices.Equal(got, []string{"delete-earlier", "create"}) || len(ie.NotStarted) != 0 || ie.Count != 3 {
		t.Errorf("finished %v, not started %v of %d", got, ie.NotStarted, ie.Count)
	}
	if !strings.Contains(ie.Resume, "gpuctl verify again") {
		t.Errorf("resume %q", ie.Resume)
	}
	if res == nil || len(res.Removed) != 2 || res.Interrupted != ie {
		t.Fatalf("removed %v, want both pods, and the interrupt in the result", res)
	}
	// The pods are deleted after the interrupt, as a step of its own.
	if last := res.Steps[len(res.Steps)-1]; last.ID != "delete" || last.Outcome != event.StepSucceeded || !last.Changed {
		t.Errorf("steps %+v, want the run's pods deleted last", res.Steps)
	}
	if left := verifyPodsLeft(t, kc); len(left) > 0 {
		t.Errorf("verify left pods behind: %v", left)
	}
}

func stepIDs(steps []runner.StepResult) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.ID)
	}
	return out
}

func TestVerifyNotInstalled(t *testing.T) {
	kc := fake.NewClientset(gpuNode("gpu-1", nil))
	_, err := (&Verify{Clients: &kube.Clients{Kube: kc, Namespace: "gpu-operator"}}).Run(t.Context())
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("err = %v, want ErrNotInstalled", err)
	}
}

// writes are the actions of a fake cluster that change something (a SelfSubjectAccessReview, a
// question, changes nothing).
func writes(kc *fake.Clientset) []string {
	var out []string
	for _, a := range kc.Actions() {
		switch {
		case a.GetVerb() == "get", a.GetVerb() == "list", a.GetVerb() == "watch", a.GetResource().Resource == "selfsubjectaccessreviews":
		default:
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource+" "+a.GetNamespace())
		}
	}
	return out
}

// A dry run writes nothing, not even the lock's Lease, and lists exactly what the run then does.
func TestVerifyDryRunIsTheRun(t *testing.T) {
	leftover := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gpuctl-verify-gpu-1-ffffff", Namespace: "gpu-operator", UID: "uid-leftover",
		Labels: map[string]string{VerifyNameLabel: plan.VerifyName, managedByLabel: "gpuctl", VerifyRunLabel: "ffffff"}}}
	kc := verifyCluster(t, map[string]kubelet{"gpu-1": succeeds, "gpu-2": succeeds}, gpuNode("gpu-1", nil), gpuNode("gpu-2", nil), leftover)
	kc.ClearActions()
	clients := &kube.Clients{Kube: kc, Namespace: "gpu-operator"}
	dry, err := (&Verify{Clients: clients, Options: VerifyOptions{DryRun: true, ImagePullSecrets: []string{"mirror"}}}).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if w := writes(kc); len(w) > 0 {
		t.Errorf("the dry run wrote: %v", w)
	}
	p := dry.Plan
	if !dry.DryRun || p == nil || dry.Done != nil || dry.RunID != p.RunID {
		t.Fatalf("dry run result %+v", dry)
	}
	want := []plan.VerifyDeletion{{Namespace: "gpu-operator", Name: leftover.Name, UID: leftover.UID, Why: "left by an earlier verify run (ffffff)"}}
	if !reflect.DeepEqual(p.Delete, want) {
		t.Errorf("plan deletes %+v, want %+v", p.Delete, want)
	}
	if len(p.Create) != 2 || p.Create[0].Node != "gpu-1" || p.Create[1].Node != "gpu-2" || !slices.Equal(p.ImagePullSecrets, []string{"mirror"}) {
		t.Errorf("plan creates %+v with secrets %v", p.Create, p.ImagePullSecrets)
	}

	res, err := (&Verify{Clients: clients, Options: VerifyOptions{ImagePullSecrets: []string{"mirror"}}}).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Done, p) {
		t.Errorf("the run did %+v, the dry run listed %+v", res.Done, p)
	}
	if !slices.Equal(res.RemovedEarlier, []string{leftover.Name}) || !slices.Equal(res.Removed, p.DeleteAtEnd) {
		t.Errorf("removed earlier %v and at the end %v", res.RemovedEarlier, res.Removed)
	}
}

// A pod replaced under the name of a planned one between the plan and the delete (someone else's) is
// left alone, and the run says so: the delete carries the planned UID as a precondition.
func TestVerifyLeavesAReplacedPodAlone(t *testing.T) {
	leftover := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gpuctl-verify-gpu-1-ffffff", Namespace: "gpu-operator", UID: "uid-leftover",
		Labels: map[string]string{VerifyNameLabel: plan.VerifyName, managedByLabel: "gpuctl", VerifyRunLabel: "ffffff"}}}
	kc := verifyCluster(t, map[string]kubelet{"gpu-1": succeeds}, gpuNode("gpu-1", nil), leftover)
	replaced := false
	kc.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if replaced || a.(k8stesting.ListAction).GetListRestrictions().Labels.Empty() {
			return false, nil, nil
		}
		// The plan sees the leftover; right after, someone replaces it with a pod of their own.
		replaced = true
		list := &corev1.PodList{Items: []corev1.Pod{*leftover.DeepCopy()}}
		other := leftover.DeepCopy()
		other.UID = "uid-someone-elses"
		if err := kc.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), other, other.Namespace); err != nil {
			t.Fatal(err)
		}
		return true, list, nil
	})
	var msgs []string
	res, err := (&Verify{Clients: &kube.Clients{Kube: kc, Namespace: "gpu-operator"},
		Sink: event.SinkFunc(func(e event.Event) { msgs = append(msgs, e.Message) })}).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.Delete) != 1 || len(res.Done.Delete) != 0 || len(res.RemovedEarlier) != 0 {
		t.Errorf("planned %+v, deleted %+v (%v); want the replaced pod left alone", res.Plan.Delete, res.Done.Delete, res.RemovedEarlier)
	}
	o, err := kc.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), "gpu-operator", leftover.Name)
	if err != nil || o.(*corev1.Pod).UID != "uid-someone-elses" {
		t.Errorf("the other pod: %v, %v", o, err)
	}
	if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, "left pod gpu-operator/"+leftover.Name+" alone") }) {
		t.Errorf("no event says the pod was left alone: %q", msgs)
	}
}

// An interrupt before the first write (here while verify reads the GPU nodes) says nothing was
// changed, and no pod is created.
func TestVerifyInterruptedBeforeTheFirstWrite(t *testing.T) {
	kc := verifyCluster(t, map[string]kubelet{"gpu-1": succeeds}, gpuNode("gpu-1", nil))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	kc.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		cancel()
		return true, nil, ctx.Err()
	})
	_, err := (&Verify{Clients: &kube.Clients{Kube: kc, Namespace: "gpu-operator"}}).Run(ctx)
	var ie *runner.InterruptedError
	if !errors.As(err, &ie) || !ie.BeforeFirstWrite {
		t.Fatalf("err = %v, want an interrupt before the first write", err)
	}
	for _, a := range kc.Actions() {
		if a.GetResource().Resource == "pods" && a.GetVerb() == "create" {
			t.Errorf("created a pod")
		}
	}
}

// A caller who may create pods but not delete them (or not make DRA's ResourceClaimTemplates) is
// refused before the first pod: the run could not remove pods that hold GPUs.
func TestVerifyRefusesACallerWhoCouldNotCleanUp(t *testing.T) {
	for _, tc := range []struct {
		name, verb, resource string
		dra                  bool
		want                 string
	}{
		{"no delete on pods", "delete", "pods", false, "you may not delete pods in gpu-operator"},
		{"no watch on pods", "watch", "pods", false, "you may not watch pods in gpu-operator"},
		{"no ResourceClaimTemplates on the DRA stack", "create", "resourceclaimtemplates", true, "you may not create resource.k8s.io/resourceclaimtemplates in gpu-operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := verifyCluster(t, map[string]kubelet{"gpu-1": succeeds}, gpuNode("gpu-1", nil))
			if tc.dra {
				if err := record.Write(t.Context(), kc, &record.Record{Namespace: "gpu-operator", Inputs: record.Inputs{DRA: true}}); err != nil {
					t.Fatal(err)
				}
			}
			denyAccess(kc, tc.verb, tc.resource)
			kc.ClearActions()
			res, err := (&Verify{Clients: &kube.Clients{Kube: kc, Namespace: "gpu-operator"}}).Run(t.Context())
			if !errors.Is(err, preflight.ErrFailed) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want a failed preflight on one line naming %q", err, tc.want)
			}
			if res != nil {
				t.Errorf("a refused run returned a result: %+v", res)
			}
			for _, a := range kc.Actions() {
				if a.GetVerb() == "create" && a.GetResource().Resource != "selfsubjectaccessreviews" && a.GetResource().Resource != "leases" {
					t.Errorf("a refused run created a %s", a.GetResource().Resource)
				}
			}
		})
	}
}

// A run whose pods cannot be deleted at its end (an admission webhook refuses, the API server goes
// away) keeps its verdicts but fails, naming how to remove the pods.
func TestVerifyFailsWhenItsPodsAreLeft(t *testing.T) {
	kc := verifyCluster(t, map[string]kubelet{"gpu-1": succeeds}, gpuNode("gpu-1", nil))
	kc.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), a.(k8stesting.DeleteAction).GetName(), errors.New("denied by an admission webhook"))
	})
	res, err := (&Verify{Clients: &kube.Clients{Kube: kc, Namespace: "gpu-operator"}}).Run(t.Context())
	if !errors.Is(err, ErrPodsLeft) || errors.Is(err, ErrVerifyFailed) || !strings.Contains(err.Error(), "kubectl delete pods -n gpu-operator -l "+VerifyRunLabel+"=") {
		t.Fatalf("err = %v, want ErrPodsLeft with the way to remove them", err)
	}
	if res == nil || !res.Passed || len(res.Nodes) != 1 || res.Nodes[0].Outcome != VerifyPassed {
		t.Fatalf("result %+v: want the node's verdict kept", res)
	}
	if last := res.Steps[len(res.Steps)-1]; last.ID != verifyStepDelete || last.Outcome != event.StepFailed {
		t.Errorf("last step %+v, want the deletion failed", last)
	}
	if len(res.Removed) != 0 {
		t.Errorf("removed %v", res.Removed)
	}
}
