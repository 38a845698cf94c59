package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/lock"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/uninstall"
)

var nvidiaDrivers = schema.GroupVersionResource{Group: "nvidia.com", Version: "v1alpha1", Resource: "nvidiadrivers"}

// adminLabels are what an admin sets on GPU nodes after the install, in the operator's own prefix:
// the MIG layout and the device plugin's config, as NVIDIA's docs have them do with kubectl label.
var adminLabels = map[string]string{"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/device-plugin.config": "a100-80gb"}

// labelAs sets labels on a node as the named field manager (kubectl label is "kubectl-label").
func labelAs(t *testing.T, c *sandbox.Cluster, node, manager string, labels map[string]string) {
	t.Helper()
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kube.CoreV1().Nodes().Patch(t.Context(), node, types.MergePatchType, data, metav1.PatchOptions{FieldManager: manager}); err != nil {
		t.Fatalf("label node %s as %s: %v", node, manager, err)
	}
}

// joinNode registers a node after the install, as a kubelet would: a copy of an existing CPU node
// under a new name, simulated by kwok like the others.
func joinNode(t *testing.T, c *sandbox.Cluster, name string) {
	t.Helper()
	var from *corev1.Node
	for _, n := range c.Nodes {
		if n.Hardware.GPUs == 0 && n.Node.Labels["node-role.kubernetes.io/control-plane"] == "" {
			from = n.Node.DeepCopy()
			break
		}
	}
	if from == nil {
		t.Fatal("the scenario has no CPU worker to copy")
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: maps.Clone(from.Labels), Annotations: maps.Clone(from.Annotations)},
		Spec: corev1.NodeSpec{ProviderID: strings.ReplaceAll(from.Spec.ProviderID, from.Name, name)}, Status: from.Status}
	n.Labels["kubernetes.io/hostname"] = name
	if _, err := c.Kube.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{FieldManager: "kubelet"}); err != nil {
		t.Fatalf("join node %s: %v", name, err)
	}
}

// ownedBy names the objects of the operator's operand kinds that still point at owner.
func ownedBy(t *testing.T, dyn dynamic.Interface, owner types.UID) []string {
	t.Helper()
	var out []string
	for _, gvr := range []schema.GroupVersionResource{
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
		{Version: "v1", Resource: "serviceaccounts"},
		{Version: "v1", Resource: "configmaps"},
		{Version: "v1", Resource: "services"},
		{Group: "apps", Version: "v1", Resource: "daemonsets"},
		{Group: "node.k8s.io", Version: "v1", Resource: "runtimeclasses"},
	} {
		list, err := dyn.Resource(gvr).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list %s: %v", gvr.Resource, err)
		}
		for _, o := range list.Items {
			for _, r := range o.GetOwnerReferences() {
				if r.UID == owner {
					out = append(out, gvr.Resource+" "+o.GetNamespace()+"/"+o.GetName())
				}
			}
		}
	}
	return out
}

// TestUninstallTouchesOnlyWhatIsGpuctls is gpuctl issue 21 on one sandbox with NVIDIA's real
// operator: after the install an admin labels GPU nodes in the operator's prefix, another team
// creates its own NVIDIADriver, and a GPU node joins. uninstall --purge then refuses before any
// change (the team's NVIDIADriver would go with its CRD); plain uninstall deletes the ClusterPolicy
// gpuctl made, exactly as its dry run said, returns only when the garbage collector has removed what
// it owned, and leaves the team's NVIDIADriver and every admin label, on the new node too; the stack's
// labels go. uninstall --purge --force then deletes the CRDs, the team's NVIDIADriver with them.
func TestUninstallTouchesOnlyWhatIsGpuctls(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1}})
	ctx := t.Context()
	dyn := dynamicClient(t, c)
	nodesBefore := nodesMetadata(t, c)
	installJSON(t, c)

	gpuNodes := simulatedGPUNodes(c)
	if real, _ := c.NVIDIAsDevicePluginServes(gpuNodes[0]); real {
		// The labels uninstall must take back are the real writers': NFD's nfd-master for NFD's
		// workers and for NVIDIA's GFD (gpuctl issue 34).
		assertNFDLabels(t, c, gpuNodes, true)
		assertGFDLabels(t, c, "gpu-operator", gpuNodes)
	}
	for _, n := range gpuNodes {
		labelAs(t, c, n, "kubectl-label", adminLabels)
	}
	team := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver",
		"metadata": map[string]any{"name": "team-a"}, "spec": map[string]any{"nodeSelector": map[string]any{"team": "a"}}}}
	team, err := dyn.Resource(nvidiaDrivers).Create(ctx, team, metav1.CreateOptions{FieldManager: "kubectl-create"})
	if err != nil {
		t.Fatal(err)
	}
	// A GPU node joins: NFD finds its GPU (nfd-master's label; the stand-in only knows the nodes the
	// scenario started with), the operator labels it, and its admin labels it.
	const joined = "gpu-joined-1"
	joinNode(t, c, joined)
	labelAs(t, c, joined, "nfd-master", map[string]string{"feature.node.kubernetes.io/pci-10de.present": "true"})
	labelAs(t, c, joined, "kubectl-label", map[string]string{"nvidia.com/mig.config": "all-disabled"})
	waitUntil(t, 3*time.Minute, "the operator labels the joined GPU node", func(ctx context.Context) (bool, error) {
		n, err := c.Kube.CoreV1().Nodes().Get(ctx, joined, metav1.GetOptions{})
		return err == nil && n.Labels["nvidia.com/gpu.present"] == "true", err
	})
	cp, err := dyn.Resource(clusterPolicies).Get(ctx, "cluster-policy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if owned := ownedBy(t, dyn, cp.GetUID()); len(owned) == 0 {
		t.Fatal("the real operator made nothing owned by the ClusterPolicy: the test would prove nothing")
	}

	// uninstallDryRun is uninstall --dry-run -o json's plan.
	uninstallDryRun := func(t *testing.T) engine.UninstallResult {
		t.Helper()
		code, stdout, stderr := gpuctl(t, c, "uninstall", "--dry-run", "-o", "json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var dryRun engine.UninstallResult
		if err := json.Unmarshal([]byte(stdout), &dryRun); err != nil || dryRun.Plan == nil {
			t.Fatalf("uninstall --dry-run -o json: %v\n%s", err, stdout)
		}
		return dryRun
	}

	t.Run("the dry run lists what gpuctl would delete and what it keeps, and changes nothing", func(t *testing.T) {
		dryRun := uninstallDryRun(t)
		var deletes []string
		for _, d := range dryRun.Plan.Delete {
			if d.Kind == "ClusterPolicy" || d.Kind == "NVIDIADriver" {
				deletes = append(deletes, d.String()+" "+string(d.UID))
			}
		}
		if want := []string{"ClusterPolicy cluster-policy " + string(cp.GetUID())}; !slices.Equal(deletes, want) {
			t.Errorf("dry run deletes %v, want %v", deletes, want)
		}
		if !slices.ContainsFunc(dryRun.Plan.Kept, func(k uninstall.KeptObject) bool { return k.String() == "NVIDIADriver team-a (not created by gpuctl)" }) {
			t.Errorf("dry run keeps %v, want NVIDIADriver team-a", dryRun.Plan.Kept)
		}
		if code, _, _ := gpuctl(t, c, "uninstall", "--dry-run"); code != 0 {
			t.Errorf("uninstall --dry-run (text): exit %d", code)
		}
		if _, err := dyn.Resource(clusterPolicies).Get(ctx, "cluster-policy", metav1.GetOptions{}); err != nil {
			t.Errorf("the dry run deleted the ClusterPolicy: %v", err)
		}
	})

	t.Run("purge refuses before any change when a CRD has custom resources gpuctl did not create", func(t *testing.T) {
		before := clusterState(t, c)
		nodes := nodesMetadata(t, c)
		code, _, stderr := uninstallJSON(t, c, "--yes", "--purge")
		if code != cli.ExitPreflight || !strings.Contains(stderr, "NVIDIADriver team-a") || !strings.Contains(stderr, "--force") {
			t.Errorf("exit %d, want %d naming NVIDIADriver team-a and --force: %s", code, cli.ExitPreflight, stderr)
		}
		after := clusterState(t, c)
		for k, v := range before {
			if _, ok := after[k]; !ok {
				t.Errorf("the refused purge deleted %s (%s)", k, v)
			}
		}
		if got := nodesMetadata(t, c); !maps.EqualFunc(nodes, got, func(a, b nodeMetadata) bool { return maps.Equal(a.Labels, b.Labels) }) {
			t.Errorf("the refused purge changed node labels")
		}
		helmRelease(t, c, "gpu-operator")
	})

	t.Run("uninstall deletes what gpuctl made, as the dry run said, and is done when it says so", func(t *testing.T) {
		dryRun := uninstallDryRun(t)
		code, res, stderr := uninstallJSON(t, c, "--yes")
		if code != 0 || !res.Changed {
			t.Fatalf("exit %d, changed %v: %s", code, res.Changed, stderr)
		}
		// Right after it returns: nothing the ClusterPolicy owned is left (operand ClusterRoles,
		// ClusterRoleBindings, ServiceAccounts, DaemonSets, …).
		if left := ownedBy(t, dyn, cp.GetUID()); len(left) > 0 {
			t.Errorf("owned by the deleted ClusterPolicy and still there when uninstall returned: %v", left)
		}
		if _, err := dyn.Resource(clusterPolicies).Get(ctx, "cluster-policy", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ClusterPolicy after uninstall: %v", err)
		}
		if got, err := dyn.Resource(nvidiaDrivers).Get(ctx, "team-a", metav1.GetOptions{}); err != nil || got.GetUID() != team.GetUID() {
			t.Errorf("the team's NVIDIADriver after uninstall: %v", err)
		}
		var planned, ran []string
		for _, d := range dryRun.Plan.Delete {
			planned = append(planned, d.String()+" "+string(d.UID))
		}
		for _, d := range res.Plan.Delete {
			ran = append(ran, d.String()+" "+string(d.UID))
		}
		if !slices.Equal(planned, ran) {
			t.Errorf("uninstall deleted\n%v\nits dry run listed\n%v", ran, planned)
		}
		var said bool
		for _, s := range res.Steps {
			said = said || strings.Contains(s.Message, "kept NVIDIADriver team-a (not created by gpuctl)")
		}
		if !said {
			t.Errorf("no step says it kept NVIDIADriver team-a: %+v", res.Steps)
		}
		nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes.Items {
			want := map[string]string{}
			if b, ok := nodesBefore[n.Name]; ok {
				maps.Copy(want, b.Labels)
			}
			switch {
			case slices.Contains(gpuNodes, n.Name):
				maps.Copy(want, adminLabels)
			case n.Name == joined:
				continue // checked below
			}
			if !maps.Equal(n.Labels, want) {
				t.Errorf("node %s labels after uninstall:\n%v\nwant\n%v", n.Name, n.Labels, want)
			}
		}
		n, err := c.Kube.CoreV1().Nodes().Get(ctx, joined, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range n.Labels {
			if strings.HasPrefix(k, "nvidia.com/") || strings.HasPrefix(k, "feature.node.kubernetes.io/") {
				if k != "nvidia.com/mig.config" || v != "all-disabled" {
					t.Errorf("joined node %s keeps the stack's label %s=%s", joined, k, v)
				}
			}
		}
		if n.Labels["nvidia.com/mig.config"] != "all-disabled" {
			t.Errorf("joined node %s lost its admin's label: %v", joined, n.Labels)
		}
	})

	t.Run("purge --force deletes the CRDs gpuctl created, the team's NVIDIADriver with them", func(t *testing.T) {
		code, _, stderr := uninstallJSON(t, c, "--yes", "--purge", "--force")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if _, err := dyn.Resource(nvidiaDrivers).Get(ctx, "team-a", metav1.GetOptions{}); err == nil {
			t.Error("NVIDIADriver team-a is still there after --purge --force deleted its CRD")
		}
		for _, n := range gpuNodes {
			node, err := c.Kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range adminLabels {
				if node.Labels[k] != v {
					t.Errorf("node %s lost the admin's %s=%s: %v", n, k, v, node.Labels)
				}
			}
		}
	})
}

// TestUninstallTakesOnlyWhatTheRecordSaysIsGpuctls is gpuctl issue 32 (items 1 and 2) on the Day-2
// sandbox with NVIDIA's real operator. A ConfigMap a user created in the operator's namespace keeps
// that namespace through uninstall --purge: its dry run names both, the purge exits 0, says so and
// keeps them, and a later purge, once the ConfigMap is gone, deletes the namespace. Without the
// install record, uninstall refuses (exit 5, naming the releases and --adopt) and changes nothing,
// its dry run too; --adopt removes the stack.
func TestUninstallTakesOnlyWhatTheRecordSaysIsGpuctls(t *testing.T) {
	t.Parallel()
	s := cleanSandbox(t, day2Scenario)
	c := s.Cluster
	ns := "gpu-operator"

	t.Run("purge keeps a namespace that holds a ConfigMap gpuctl did not create", func(t *testing.T) {
		ctx := t.Context()
		installJSON(t, c)
		notes := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "team-notes", Namespace: ns}, Data: map[string]string{"owner": "team-a"}}
		notes, err := c.Kube.CoreV1().ConfigMaps(ns).Create(ctx, notes, metav1.CreateOptions{FieldManager: "kubectl-create"})
		if err != nil {
			t.Fatal(err)
		}
		const kept = "namespace gpu-operator: it holds ConfigMap team-notes, which gpuctl did not create"

		code, stdout, stderr := gpuctl(t, c, "uninstall", "--purge", "--dry-run")
		if code != 0 || !strings.Contains(stdout, "keep "+kept) {
			t.Errorf("uninstall --purge --dry-run: exit %d, want 0 and a plan saying %q:\n%s%s", code, "keep "+kept, stdout, stderr)
		}
		// The namespace holds nothing else that is not gpuctl's: the release's objects, the operator's
		// operands, Helm's storage, what Kubernetes puts there are all known.
		code, dryRun, stderr := uninstallJSON(t, c, "--purge", "--dry-run")
		want := []uninstall.KeptNamespace{{Name: ns, Holds: []string{"ConfigMap team-notes"}}}
		if code != 0 || dryRun.Plan == nil || dryRun.Plan.Purge == nil || !reflect.DeepEqual(dryRun.Plan.Purge.KeptNamespaces, want) {
			t.Fatalf("uninstall --purge --dry-run -o json: exit %d, plan %+v; want namespace %s kept for team-notes alone: %s", code, dryRun.Plan, ns, stderr)
		}

		code, res, stderr := uninstallJSON(t, c, "--purge", "--yes")
		if code != 0 || !res.Changed || !reflect.DeepEqual(res.KeptNamespaces, want) || !strings.Contains(stderr, "keeps "+kept) {
			t.Errorf("uninstall --purge: exit %d, kept %+v; want 0, the namespace kept for team-notes, and a warning saying %q:\n%s", code, res.KeptNamespaces, "keeps "+kept, stderr)
		}
		if h := releaseHistory(t, c, "gpu-operator"); len(h) > 0 {
			t.Errorf("release gpu-operator is still there: %s", history(t, c, "gpu-operator"))
		}
		if got, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "team-notes", metav1.GetOptions{}); err != nil || got.UID != notes.UID {
			t.Fatalf("ConfigMap team-notes after the purge: %v", err)
		}
		if n, err := c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil || n.DeletionTimestamp != nil {
			t.Fatalf("namespace %s after the purge: %v (deleting: %v)", ns, err, n.DeletionTimestamp)
		}

		// Once the ConfigMap is gone, the record the purge kept lets a second purge finish.
		if err := c.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, "team-notes", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if code, res, stderr := uninstallJSON(t, c, "--purge", "--yes"); code != 0 || len(res.KeptNamespaces) > 0 {
			t.Fatalf("the second purge: exit %d, kept %+v: %s", code, res.KeptNamespaces, stderr)
		}
		if _, err := c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace %s after the second purge: %v, want it gone", ns, err)
		}
		if rec, err := record.Read(ctx, c.Kube); err != nil || rec != nil {
			t.Errorf("install record after the second purge: %+v, %v; want none", rec, err)
		}
	})

	t.Run("without the install record uninstall refuses unless --adopt", func(t *testing.T) {
		ctx := t.Context()
		crdsBefore, nodesBefore := crdNames(t, c), nodesMetadata(t, c)
		installJSON(t, c)
		defer removeLeftovers(t, c, ns, crdsBefore)
		if err := c.Kube.CoreV1().ConfigMaps(record.Namespace).Delete(ctx, record.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		histories := map[string]string{}
		for _, name := range []string{"gpu-operator", "node-feature-discovery"} {
			histories[name] = history(t, c, name)
		}
		nodes := nodesMetadata(t, c)
		lease := func() string {
			l, err := c.Kube.CoordinationV1().Leases(lock.DefaultNamespace).Get(ctx, lock.DefaultName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return "none"
			}
			if err != nil {
				t.Fatal(err)
			}
			return l.ResourceVersion
		}
		leaseBefore := lease()
		for _, args := range [][]string{{"uninstall", "--yes"}, {"uninstall", "--dry-run"}, {"uninstall", "--purge", "--yes"}} {
			code, _, stderr := gpuctl(t, c, args...)
			if code != cli.ExitPreflight || !strings.Contains(stderr, "gpu-operator/gpu-operator (labelled gpuctl.io/managed=true)") ||
				!strings.Contains(stderr, "gpu-operator/node-feature-discovery (labelled gpuctl.io/managed=true)") || !strings.Contains(stderr, "--adopt") {
				t.Errorf("gpuctl %v without a record: exit %d, want %d naming the releases, gpuctl's label and --adopt:\n%s", args, code, cli.ExitPreflight, stderr)
			}
		}
		for name, h := range histories {
			if got := history(t, c, name); got != h {
				t.Errorf("the refused uninstall changed release %s: %s, was %s", name, got, h)
			}
		}
		if got := nodesMetadata(t, c); !reflect.DeepEqual(got, nodes) {
			t.Errorf("the refused uninstall changed the nodes' labels or taints")
		}
		if got := lease(); got != leaseBefore {
			t.Errorf("the refused uninstall wrote the lock's Lease (resourceVersion %s, was %s): it refuses before taking the lock", got, leaseBefore)
		}

		code, res, stderr := uninstallJSON(t, c, "--adopt", "--yes")
		if code != 0 || !res.Changed {
			t.Fatalf("uninstall --adopt: exit %d, changed %v: %s", code, res.Changed, stderr)
		}
		for name := range histories {
			if h := releaseHistory(t, c, name); len(h) > 0 {
				t.Errorf("release %s is still there after uninstall --adopt: %s", name, history(t, c, name))
			}
		}
		if got := nodesMetadata(t, c); !reflect.DeepEqual(got, nodesBefore) {
			t.Errorf("node labels and taints after uninstall --adopt are not as before the install:\n%v\nwant\n%v", got, nodesBefore)
		}
	})
}

// removeLeftovers deletes what an uninstall without a record cannot know to purge (the namespace
// and the CRDs the install created), as a user would by hand, so the shared sandbox is as it started.
// Deferred: it runs after a failure too, and logs what it could not do.
func removeLeftovers(t *testing.T, c *sandbox.Cluster, ns string, crdsBefore []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	crds := dynamic.NewForConfigOrDie(c.Config).Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	left := func() ([]string, error) {
		list, err := crds.List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var out []string
		for _, o := range list.Items {
			if !slices.Contains(crdsBefore, o.GetName()) {
				out = append(out, o.GetName())
			}
		}
		if _, err := c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			out = append(out, "namespace "+ns)
		}
		return out, nil
	}
	names, err := left()
	for _, name := range names {
		if name == "namespace "+ns {
			err = c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		} else {
			err = crds.Delete(ctx, name, metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("clean up %s: %v", name, err)
		}
	}
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(context.Context) (bool, error) {
		names, err = left()
		return err == nil && len(names) == 0, nil
	})
	if err != nil {
		t.Logf("clean up: still there: %v (%v)", names, err)
	}
}
