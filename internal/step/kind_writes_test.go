package step

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
)

// fakeCluster is Kubernetes' fake clients with the server-side apply gpuctl uses (a dry run changes
// nothing), whose writes are read back from the clients' actions.
type fakeCluster struct {
	kube *fake.Clientset
	dyn  *dynamicfake.FakeDynamicClient
	m    *meta.DefaultRESTMapper
	helm *release.Client
	// psp: discovery serves policy/v1beta1 podsecuritypolicies.
	psp bool
}

// resources are the kinds the fake serves: GVR, kind, namespaced.
var fakeResources = []struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
}{
	{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ConfigMap", true},
	{schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, "Secret", true},
	{schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "Namespace", false},
	{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}, "RoleBinding", true},
	{health.ClusterPolicyResource(), "ClusterPolicy", false},
	{kube.SubscriptionsGVR, "Subscription", true},
	{kube.CSVsGVR, "ClusterServiceVersion", true},
}

func newFakeCluster(t *testing.T, nodes []runtime.Object, objs ...runtime.Object) *fakeCluster {
	t.Helper()
	c := &fakeCluster{kube: fake.NewClientset(nodes...), m: meta.NewDefaultRESTMapper(nil)}
	lists := map[schema.GroupVersionResource]string{}
	for _, r := range fakeResources {
		scope := meta.RESTScopeRoot
		if r.namespaced {
			scope = meta.RESTScopeNamespace
		}
		c.m.Add(r.gvr.GroupVersion().WithKind(r.kind), scope)
		lists[r.gvr] = r.kind + "List"
	}
	c.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, objs...)
	c.dyn.PrependReactor("patch", "*", c.apply)
	cfg := action.NewConfiguration()
	cfg.Releases = storage.Init(driver.NewMemory())
	cfg.KubeClient = &kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}}
	cfg.Capabilities = common.DefaultCapabilities
	c.helm = release.NewWithConfiguration(cfg, "gpu-operator")
	return c
}

// apply is server-side apply as far as gpuctl's writes need it: the applied fields merged over the
// object (or the object created), stored unless the patch is a dry run.
func (c *fakeCluster) apply(a k8stesting.Action) (bool, runtime.Object, error) {
	p, ok := a.(k8stesting.PatchActionImpl)
	if !ok || p.GetPatchType() != "application/apply-patch+yaml" {
		return false, nil, nil
	}
	var applied map[string]any
	if err := json.Unmarshal(p.GetPatch(), &applied); err != nil {
		return true, nil, err
	}
	tracker := c.dyn.Tracker()
	have, err := tracker.Get(p.GetResource(), p.GetNamespace(), p.GetName())
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return true, nil, err
	}
	obj := &unstructured.Unstructured{Object: applied}
	if exists {
		base, err := runtime.DefaultUnstructuredConverter.ToUnstructured(have)
		if err != nil {
			return true, nil, err
		}
		obj = &unstructured.Unstructured{Object: plan.MergeValues(base, applied)}
	}
	if slices.Contains(p.PatchOptions.DryRun, metav1.DryRunAll) {
		return true, obj, nil
	}
	if exists {
		return true, obj, tracker.Update(p.GetResource(), obj, p.GetNamespace())
	}
	return true, obj, tracker.Create(p.GetResource(), obj, p.GetNamespace())
}

func (c *fakeCluster) clients() *kube.Clients {
	disc := c.kube.Discovery().(*fakediscovery.FakeDiscovery)
	if c.psp {
		disc.Resources = []*metav1.APIResourceList{{GroupVersion: "policy/v1beta1", APIResources: []metav1.APIResource{{Name: "podsecuritypolicies", Kind: "PodSecurityPolicy"}}}}
	}
	return &kube.Clients{Kube: c.kube, Dynamic: c.dyn, Mapper: c.m, Discovery: disc, Namespace: "gpu-operator"}
}

// written names what the clients' actions wrote (dry runs left out), as "Kind ns/name".
func (c *fakeCluster) written() []string {
	var out []string
	for _, a := range append(c.dyn.Actions(), c.kube.Actions()...) {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete":
		default:
			continue
		}
		if p, ok := a.(k8stesting.PatchActionImpl); ok && slices.Contains(p.PatchOptions.DryRun, metav1.DryRunAll) {
			continue
		}
		name := ""
		switch a := a.(type) {
		case k8stesting.PatchActionImpl:
			name = a.GetName()
		case k8stesting.CreateActionImpl:
			name, _ = metaName(a.GetObject())
		case k8stesting.UpdateActionImpl:
			name, _ = metaName(a.GetObject())
		}
		out = append(out, a.GetResource().Resource+" "+a.GetNamespace()+"/"+name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func metaName(o runtime.Object) (string, error) {
	m, err := meta.Accessor(o)
	if err != nil {
		return "", err
	}
	return m.GetName(), nil
}

// listed names what a dry run listed as certain writes (create, update) and possible ones (apply),
// as written names them.
func listed(w *plan.Writes) (certain, possible []string) {
	resource := map[string]string{"ConfigMap": "configmaps", "Secret": "secrets", "Namespace": "namespaces", "RoleBinding": "rolebindings", "ClusterPolicy": "clusterpolicies"}
	for _, o := range w.Objects {
		name := resource[o.Kind] + " " + o.Namespace + "/" + o.Name
		switch o.Action {
		case plan.WriteCreate, plan.WriteUpdate:
			certain = append(certain, name)
		case plan.WriteApply:
			possible = append(possible, name)
		}
	}
	for _, n := range w.Nodes {
		certain = append(certain, "nodes /"+n.Node)
	}
	for _, l := range w.Labels {
		certain = append(certain, "nodes /"+l.Node)
	}
	slices.Sort(certain)
	return slices.Compact(certain), possible
}

func configMap(ns, name string, data map[string]any) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": ns}, "data": data}
}

func gpuNodeObj(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

// TestTheDryRunListsWhatTheRunWrites runs each kind that writes twice over the same cluster: its
// Writes (the dry run) on one copy, its Do on another; what Do wrote must be what Writes listed
// (certainly: create or update; possibly: apply, which only the run can decide), and nothing more.
// Not here: the CRD kind, whose run waits for the API server to establish each CRD (kube.ApplyCRDs
// decides its dry run and its run with the same code; the e2e install compares both on a real API
// server), the waits, which write nothing (type waiting), and the kinds whose writes are decided at
// run time and listed as rules (approve, mig-labels-after-gfd, safety's tolerations).
func TestTheDryRunListsWhatTheRunWrites(t *testing.T) {
	existing := &unstructured.Unstructured{Object: configMap("gpu-operator", "same", map[string]any{"a": "1"})}
	stale := &unstructured.Unstructured{Object: configMap("gpu-operator", "stale", map[string]any{"a": "old"})}
	secret := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "ngc", "namespace": "gpu-operator"}, "data": map[string]any{"k": "b2xk"}}}
	sub := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
		"metadata": map[string]any{"name": "gpu-operator-certified", "namespace": "nvidia-gpu-operator"}, "status": map[string]any{"installedCSV": "gpu-operator-certified.v26.7.0"}}}
	csv := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
		"metadata": map[string]any{"name": "gpu-operator-certified.v26.7.0", "namespace": "nvidia-gpu-operator",
			"annotations": map[string]any{"alm-examples": `[{"apiVersion":"nvidia.com/v1","kind":"ClusterPolicy","metadata":{"name":"gpu-cluster-policy"},"spec":{"driver":{"enabled":true}}}]`}}}}
	gpuTaint := corev1.Taint{Key: plan.TaintKey, Value: "present", Effect: corev1.TaintEffectNoSchedule}
	nodes := []runtime.Object{gpuNodeObj("gpu-1", map[string]string{"pool": "a"}), gpuNodeObj("gpu-2", map[string]string{"pool": "a"}, gpuTaint), gpuNodeObj("cpu-1", nil)}
	for _, tc := range []struct {
		name  string
		step  plan.Step
		objs  []runtime.Object
		setup func(x *executor)
		// psp: the cluster serves PodSecurityPolicy.
		psp bool
	}{
		{"objects: one to create, one unchanged, one to update", plan.Step{ID: "prerequisites", Kind: plan.KindObjects, Objects: []map[string]any{
			configMap("gpu-operator", "new", map[string]any{"a": "1"}), configMap("gpu-operator", "same", map[string]any{"a": "1"}),
			configMap("gpu-operator", "stale", map[string]any{"a": "new"})}}, []runtime.Object{existing, stale}, nil, false},
		{"secrets: one to create, one applied over the one there", plan.Step{ID: "licensing", Kind: plan.KindSecrets, Secrets: []plan.SecretSpec{
			{Name: "licensing-config", Namespace: "gpu-operator"}, {Name: "ngc", Namespace: "gpu-operator"}}}, []runtime.Object{secret},
			func(x *executor) {
				x.secrets = []map[string]any{
					{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "licensing-config", "namespace": "gpu-operator"}, "data": map[string]any{"gridd.conf": "eA=="}},
					{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "ngc", "namespace": "gpu-operator"}, "data": map[string]any{"k": "bmV3"}}}
			}, false},
		{"psp: no binding where PodSecurityPolicy is not served", plan.Step{ID: "psp", Kind: plan.KindPSP, Target: "gpu-operator"}, nil, nil, false},
		{"psp: the binding where PodSecurityPolicy is served", plan.Step{ID: "psp", Kind: plan.KindPSP, Target: "gpu-operator"}, nil, nil, true},
		{"taint: the GPU nodes that lack it", plan.Step{ID: "taint", Kind: plan.KindTaint,
			Taint: &plan.Taint{Key: gpuTaint.Key, Value: gpuTaint.Value, Effect: string(gpuTaint.Effect), Nodes: []string{"gpu-1", "gpu-2"}}}, nil, nil, false},
		{"node-labels: the pool's nodes", plan.Step{ID: "node-labels", Kind: plan.KindNodeLabels,
			Labels: &plan.NodeLabels{Key: "nvidia.com/device-plugin.config", Nodes: map[string]string{"gpu-1": "a", "gpu-2": "a"}}}, nil, nil, false},
		{"clusterpolicy: from the CSV's alm-examples", plan.Step{ID: "clusterpolicy", Kind: plan.KindClusterPolicy, Target: "nvidia-gpu-operator/gpu-operator-certified",
			PolicyName: "gpu-cluster-policy", PolicySpec: map[string]any{"driver": map[string]any{"enabled": false}}}, []runtime.Object{sub, csv}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &plan.Plan{Namespace: "gpu-operator", Steps: []plan.Step{tc.step}}
			k, err := For(tc.step.Kind)
			if err != nil {
				t.Fatal(err)
			}
			dry := newFakeCluster(t, slices.Clone(nodes), cloneAll(tc.objs)...)
			dry.psp = tc.psp
			l := &lister{clients: dry.clients(), plan: p, releases: release.ClientsOf(map[string]*release.Client{"gpu-operator": dry.helm}), w: &plan.Writes{}}
			if err := k.Writes(context.Background(), l, &p.Steps[0]); err != nil {
				t.Fatal(err)
			}
			if w := dry.written(); len(w) > 0 {
				t.Fatalf("the dry run wrote %v", w)
			}
			certain, possible := listed(l.w)

			wet := newFakeCluster(t, slices.Clone(nodes), cloneAll(tc.objs)...)
			wet.psp = tc.psp
			x := &executor{clients: wet.clients(), plan: p, sink: event.Or(nil), gpuNodes: []string{"gpu-1", "gpu-2"},
				releases: release.ClientsOf(map[string]*release.Client{"gpu-operator": wet.helm})}
			if tc.setup != nil {
				tc.setup(x)
			}
			if _, err := k.Do(context.Background(), x, &p.Steps[0], func(health.Progress) {}); err != nil {
				t.Fatal(err)
			}
			wrote := wet.written()
			for _, w := range wrote {
				if !slices.Contains(certain, w) && !slices.Contains(possible, w) {
					t.Errorf("the run wrote %s, which the dry run did not list (it listed %v, maybe %v)", w, certain, possible)
				}
			}
			for _, c := range certain {
				if !slices.Contains(wrote, c) {
					t.Errorf("the dry run listed %s, which the run did not write (it wrote %v)", c, wrote)
				}
			}
		})
	}
}

func cloneAll(objs []runtime.Object) []runtime.Object {
	out := make([]runtime.Object, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopyObject()
	}
	return out
}

// TestTheReleaseDryRunDecidesAsTheRun: the release kind's Writes names the operation its Do then
// carries out (an install, then nothing on a second run, an upgrade once the values change), with
// gpuctl's embedded NFD chart over Helm's in-memory storage.
func TestTheReleaseDryRunDecidesAsTheRun(t *testing.T) {
	ch, err := render.LoadChart(plan.NFDRelease, "")
	if err != nil {
		t.Fatal(err)
	}
	c := newFakeCluster(t, nil)
	clients := c.clients()
	helm := release.ClientsOf(map[string]*release.Client{"gpu-operator": c.helm})
	rel := &plan.Release{Name: plan.NFDRelease, Namespace: "gpu-operator", Chart: plan.NFDRelease, ChartVersion: ch.Metadata.Version, Values: map[string]any{}}
	p := &plan.Plan{Namespace: "gpu-operator", Steps: []plan.Step{{ID: "release-nfd", Kind: plan.KindRelease, Release: rel}}}
	x := &executor{clients: clients, plan: p, sink: event.Or(nil), releases: helm}
	for i, want := range []struct{ op, outcome string }{
		{plan.ReleaseInstall, string(release.Installed)},
		{plan.ReleaseUnchanged, string(release.Unchanged)},
		{plan.ReleaseUpgrade, string(release.Upgraded)},
	} {
		if i == 2 {
			rel.Values = map[string]any{"master": map[string]any{"replicaCount": 2}}
		}
		l := &lister{clients: clients, plan: p, releases: helm, w: &plan.Writes{}}
		if err := (releaseKind{}).Writes(context.Background(), l, &p.Steps[0]); err != nil {
			t.Fatal(err)
		}
		if len(l.w.Releases) != 1 || l.w.Releases[0].Operation != want.op {
			t.Fatalf("run %d: the dry run listed %+v, want %s", i+1, l.w.Releases, want.op)
		}
		out, err := (releaseKind{}).Do(context.Background(), x, &p.Steps[0], nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Message; !strings.HasPrefix(got, want.outcome) {
			t.Errorf("run %d: the run says %q, want %s", i+1, got, want.outcome)
		}
	}
}
