package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/render"
	"github.com/gpuctl/gpuctl/internal/step"
)

// checkCluster is a kubeadm cluster at the sandbox's Kubernetes version: a control plane and one GPU
// worker. SelfSubjectAccessReviews are allowed unless deny names the verb and resource.
func checkCluster(deny func(*authorizationv1.ResourceAttributes) bool, extra ...runtime.Object) *kube.Clients {
	cp := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-1", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{OSImage: "Ubuntu 24.04.2 LTS", ContainerRuntimeVersion: "containerd://2.1.4", KubeletVersion: "v1.37.2"}}}
	gpu := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: map[string]string{"feature.node.kubernetes.io/pci-10de.present": "true"}},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
			NodeInfo: corev1.NodeSystemInfo{OSImage: "Ubuntu 24.04.2 LTS", ContainerRuntimeVersion: "containerd://2.1.4", KubeletVersion: "v1.37.2"}}}
	// A CPU worker, and MutatingAdmissionPolicy served as Kubernetes 1.37 serves it: gpuctl taints the GPU
	// node by default (plan.DecideTaint).
	cpu := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-1"},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{OSImage: "Ubuntu 24.04.2 LTS", ContainerRuntimeVersion: "containerd://2.1.4", KubeletVersion: "v1.37.2"}}}
	cs := fake.NewClientset(append([]runtime.Object{cp, gpu, cpu}, extra...)...)
	disc := cs.Discovery().(*fakediscovery.FakeDiscovery)
	disc.FakedServerVersion = &version.Info{GitVersion: "v1.37.2"}
	disc.Resources = append(disc.Resources, &metav1.APIResourceList{GroupVersion: "admissionregistration.k8s.io/v1",
		APIResources: []metav1.APIResource{{Name: "mutatingadmissionpolicies", Kind: "MutatingAdmissionPolicy"}}})
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		ra := r.Spec.ResourceAttributes
		r.Status.Allowed = deny == nil || ra == nil || !deny(ra)
		return true, r, nil
	})
	return &kube.Clients{Kube: cs, Discovery: cs.Discovery(), Namespace: "gpu-operator"}
}

func TestCheck(t *testing.T) {
	ctx := context.Background()

	t.Run("a kubeadm cluster passes, with the sandbox's newer Kubernetes only a warning", func(t *testing.T) {
		res, err := (&Check{Clients: checkCluster(nil)}).Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Report.Failed || res.Plan == nil || res.Detection == nil {
			t.Fatalf("failed %v, plan %v: %+v", res.Report.Failed, res.Plan != nil, res.Report.Results)
		}
		for id, want := range map[string]preflight.Status{
			"api": preflight.StatusPass, "plan": preflight.StatusPass, "permissions": preflight.StatusPass,
			"kubernetes-version": preflight.StatusWarn, "gpu-nodes": preflight.StatusPass, "taint-safety": preflight.StatusPass,
		} {
			if r := res.Report.Get(id); r == nil || r.Status != want {
				t.Errorf("%s: %+v, want %s", id, r, want)
			}
		}
	})

	t.Run("a missing permission fails with ErrPreflightFailed naming the check", func(t *testing.T) {
		deny := func(ra *authorizationv1.ResourceAttributes) bool {
			return ra.Verb == "*" || ra.Verb == "create" && ra.Resource == "clusterpolicies"
		}
		res, err := (&Check{Clients: checkCluster(deny)}).Run(ctx)
		if !errors.Is(err, preflight.ErrFailed) || err.Error() != "preflight checks failed: permissions" {
			t.Fatalf("err %v", err)
		}
		if r := res.Report.Get("permissions"); r.Status != preflight.StatusFail {
			t.Errorf("%+v", r)
		}
	})

	t.Run("a cluster gpuctl cannot plan for is a failed check, not an error", func(t *testing.T) {
		replicas := int32(1)
		foreign := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "nvidia", Name: "gpu-operator", Labels: map[string]string{"app": "gpu-operator"}},
			Spec: appsv1.DeploymentSpec{Replicas: &replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "gpu-operator", Image: "nvcr.io/nvidia/gpu-operator:v25.3.0", Command: []string{"gpu-operator"}}},
			}}},
		}
		res, err := (&Check{Clients: checkCluster(nil, foreign)}).Run(ctx)
		if !errors.Is(err, preflight.ErrFailed) {
			t.Fatalf("err %v", err)
		}
		if res.Plan != nil || res.Report.Get("plan").Status != preflight.StatusFail || res.Report.Get("existing-operator").Status != preflight.StatusFail {
			t.Errorf("plan %v: %+v", res.Plan != nil, res.Report.Results)
		}
		if r := res.Report.Get("permissions"); r.Status != preflight.StatusSkip {
			t.Errorf("permissions without a plan: %+v", r)
		}
	})

	t.Run("skipping a failing check lets the check pass", func(t *testing.T) {
		deny := func(ra *authorizationv1.ResourceAttributes) bool {
			return ra.Verb == "*" || ra.Resource == "clusterpolicies"
		}
		res, err := (&Check{Clients: checkCluster(deny), Skip: []string{"permissions"}}).Run(ctx)
		if err != nil || res.Report.Get("permissions").Status != preflight.StatusSkip {
			t.Errorf("err %v: %+v", err, res.Report.Get("permissions"))
		}
	})

	t.Run("skipping the plan check does not make an unplannable cluster pass", func(t *testing.T) {
		replicas := int32(1)
		foreign := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "nvidia", Name: "gpu-operator", Labels: map[string]string{"app": "gpu-operator"}},
			Spec: appsv1.DeploymentSpec{Replicas: &replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "gpu-operator", Image: "nvcr.io/nvidia/gpu-operator:v25.3.0", Command: []string{"gpu-operator"}}},
			}}},
		}
		_, err := (&Check{Clients: checkCluster(nil, foreign), Skip: []string{"plan", "existing-operator", "existing-clusterpolicy"}}).Run(ctx)
		if !errors.Is(err, preflight.ErrFailed) {
			t.Errorf("err %v", err)
		}
	})

	t.Run("an unknown check ID is an error before the cluster is read", func(t *testing.T) {
		_, err := (&Check{Clients: &kube.Clients{}, Skip: []string{"nope"}}).Run(ctx)
		if !errors.Is(err, preflight.ErrUnknownCheck) {
			t.Errorf("err %v", err)
		}
	})
}

func TestInstallPreflight(t *testing.T) {
	ctx := context.Background()
	prepare := func(t *testing.T, clients *kube.Clients) (*detect.Result, *plan.Plan) {
		t.Helper()
		det, err := detect.Run(ctx, detect.From(clients))
		if err != nil {
			t.Fatal(err)
		}
		p, err := (&Install{Clients: clients}).buildPlan(ctx, det, InstallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return det, p
	}
	record := func(events *[]event.Event) event.Sink {
		return event.SinkFunc(func(e event.Event) { *events = append(*events, e) })
	}

	t.Run("passing checks report a succeeded step and each warning", func(t *testing.T) {
		clients := checkCluster(nil)
		det, p := prepare(t, clients)
		var events []event.Event
		rep, err := installPreflight(ctx, clients, InstallOptions{}, nil, det, p, nil, record(&events), nil)
		if err != nil || rep.Failed {
			t.Fatalf("err %v, failed %v", err, rep.Failed)
		}
		types := []event.Type{}
		for _, e := range events {
			types = append(types, e.Type)
		}
		if len(events) != 3 || events[0].Type != event.StepStarted || events[1].Type != event.Warning || events[2].Type != event.StepSucceeded {
			t.Fatalf("events %v", types)
		}
		if !strings.Contains(events[1].Message, "Kubernetes 1.37 is newer") || events[1].Hint == "" || events[2].Step != "preflight" {
			t.Errorf("events %+v", events)
		}
	})

	t.Run("a failed check is a failed step listing it with its hint, and ErrPreflightFailed", func(t *testing.T) {
		clients := checkCluster(func(ra *authorizationv1.ResourceAttributes) bool {
			return ra.Verb == "*" || ra.Verb == "patch" && ra.Resource == "nodes"
		})
		det, p := prepare(t, clients)
		var events []event.Event
		_, err := installPreflight(ctx, clients, InstallOptions{}, nil, det, p, nil, record(&events), nil)
		if !errors.Is(err, preflight.ErrFailed) {
			t.Fatalf("err %v", err)
		}
		last := events[len(events)-1]
		if last.Type != event.StepFailed || !strings.Contains(last.Detail, "nodes: patch") || !strings.Contains(last.Detail, "hint: grant the rule") ||
			!strings.Contains(last.Hint, "--skip-check") {
			t.Errorf("last event %+v", last)
		}
	})

	t.Run("a planning error becomes the failed plan check", func(t *testing.T) {
		clients := checkCluster(nil)
		det, _ := prepare(t, clients)
		var events []event.Event
		rep, err := installPreflight(ctx, clients, InstallOptions{}, nil, det, nil, errors.New("a GPU operator is already installed"), record(&events), nil)
		if !errors.Is(err, preflight.ErrFailed) || rep.Get("plan").Status != preflight.StatusFail {
			t.Errorf("err %v: %+v", err, rep.Get("plan"))
		}
		_, err = installPreflight(ctx, clients, InstallOptions{}, []string{"plan"}, det, nil, errors.New("a GPU operator is already installed"), record(&events), nil)
		if !errors.Is(err, preflight.ErrFailed) {
			t.Errorf("with the plan check skipped: err %v", err)
		}
	})
}

func TestPlanObjects(t *testing.T) {
	clients := checkCluster(nil)
	det, err := detect.Run(context.Background(), detect.From(clients))
	if err != nil {
		t.Fatal(err)
	}
	p, err := (&Install{Clients: clients}).buildPlan(context.Background(), det, InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objs, _, err := step.Render(context.Background(), p, det.KubernetesVersion)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, o := range objs {
		seen[o.GetKind()+"/"+o.GetName()]++
	}
	for _, want := range []string{"Namespace/gpu-operator", "CustomResourceDefinition/clusterpolicies.nvidia.com", "ClusterPolicy/" + plan.ClusterPolicyName,
		"ClusterRole/gpu-operator", "Deployment/gpu-operator"} {
		if seen[want] != 1 {
			t.Errorf("%s appears %d times", want, seen[want])
		}
	}
	nfdWorker := false
	for k := range seen {
		if len(k) > len("DaemonSet/") && k[:len("DaemonSet/")] == "DaemonSet/" {
			nfdWorker = true
		}
	}
	if !nfdWorker {
		t.Errorf("no NFD worker DaemonSet among %v", seen)
	}
}

func TestOperatorChartIsLoadedWithItsReleasesKubernetesFloor(t *testing.T) {
	for _, tc := range []struct{ version, want string }{{"", ">= 1.32.0-0"}, {"v26.7.0", ">= 1.32.0-0"}, {"v26.3.3", ">= 1.32.0-0"}, {"v25.10.1", ">= 1.30.0-0"}} {
		ch, err := render.LoadChart(plan.OperatorRelease, tc.version)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Metadata.KubeVersion != tc.want {
			t.Errorf("%q: kubeVersion %q, want %q", tc.version, ch.Metadata.KubeVersion, tc.want)
		}
	}
}

func TestValuesFilesAreReadUpToTheCap(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("a: \""+strings.Repeat("x", render.MaxValuesFileSize)+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := render.ReadValuesFile(big); err == nil || !strings.Contains(err.Error(), "larger than gpuctl reads (10 MiB)") {
		t.Errorf("a values file over the cap: %v", err)
	}
	small := filepath.Join(dir, "small.yaml")
	if err := os.WriteFile(small, []byte("driver:\n  enabled: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := render.ReadValuesFile(small); err != nil || v["driver"] == nil {
		t.Errorf("a small values file: %v, %v", v, err)
	}
}
