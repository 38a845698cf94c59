package e2e

import (
	"context"
	"fmt"
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

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/lock"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
)

// The Day-2 tests share one kubeadm sandbox (cleanSandbox): each starts from the sandbox as it was
// started, brings it to the state it needs itself, and none depends on another's order or effect, so
// each test and subtest runs alone with -run.
var day2Scenario = sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1}}

// day2Set are the user's values of the Day-2 installs: a label on every operand pod, and every node's
// driver upgraded at once (the operator's default is one node at a time).
var day2Set = []string{"daemonsets.labels.team=gpu", "driver.upgradePolicy.maxParallelUpgrades=0"}

// installedAt installs release with the user's values (day2Set) on s; on a stack already installed so
// it changes nothing.
func installedAt(t *testing.T, s *sharedSandbox, release string) engine.InstallResult {
	t.Helper()
	res, _ := installJSON(t, s.Cluster, "--operator-version", release, "--set", day2Set[0], "--set", day2Set[1])
	return res
}

// upgradedTo leaves s's stack at release, upgrading it when the install record names another.
func upgradedTo(t *testing.T, c *sandbox.Cluster, release string) {
	t.Helper()
	rec, err := record.Read(t.Context(), c.Kube)
	if err != nil || rec == nil || rec.Uninstalled {
		t.Fatalf("upgrade to %s needs an installed stack: record %+v, %v", release, rec, err)
	}
	if rec.OperatorVersion != release {
		upgradeJSON(t, c, "--operator-version", release, "--yes", "--accept-value-changes")
	}
}

// uninstalled leaves s with a stack gpuctl installed and then uninstalled (without --purge).
func uninstalled(t *testing.T, s *sharedSandbox) {
	t.Helper()
	rec, err := record.Read(t.Context(), s.Kube)
	if err != nil {
		t.Fatal(err)
	}
	if rec != nil && rec.Uninstalled {
		return
	}
	if rec == nil {
		installedAt(t, s, "v25.10.1")
	}
	if code, res, stderr := uninstallJSON(t, s.Cluster, "--yes"); code != 0 || !res.Changed {
		t.Fatalf("uninstall: exit %d, changed %v: %s", code, res.Changed, stderr)
	}
}

// TestDay2Status: gpuctl status on nothing installed, on a healthy stack with its record, and on a
// stack whose validators are gone for good.
func TestDay2Status(t *testing.T) {
	t.Parallel()
	s := cleanSandbox(t, day2Scenario)
	c := s.Cluster

	t.Run("status on a cluster with nothing installed exits 7", func(t *testing.T) {
		code, res := statusJSON(t, c)
		if code != cli.ExitNotInstalled || res.Installed {
			t.Errorf("exit %d, installed %v; want %d, false", code, res.Installed, cli.ExitNotInstalled)
		}
	})

	installedAt(t, s, "v25.10.1")

	t.Run("status on a healthy stack exits 0 and shows the record", func(t *testing.T) {
		code, res := statusJSON(t, c)
		if code != 0 || !res.Healthy {
			t.Fatalf("exit %d, healthy %v: %+v", code, res.Healthy, res.Checks)
		}
		if res.Record == nil || res.Record.OperatorVersion != "v25.10.1" || res.Record.Profile != "kubeadm" {
			t.Errorf("record %+v", res.Record)
		}
		if got := res.Record.Inputs.Set; !slices.Equal(got, day2Set) {
			t.Errorf("recorded --set %v", got)
		}
		if len(res.Nodes) != len(simulatedGPUNodes(c)) {
			t.Errorf("node rows %+v", res.Nodes)
		}
		for _, n := range res.Nodes {
			if !n.Validated || !n.Tainted || n.Allocatable == 0 {
				t.Errorf("node %+v", n)
			}
		}
		if len(record.CreatedNames(res.Record.Namespaces)) != 1 || len(record.CreatedNames(res.Record.CRDs)) == 0 {
			t.Errorf("record says gpuctl created namespaces %v and CRDs %v", res.Record.Namespaces, res.Record.CRDs)
		}
	})

	// Last: it breaks the stack (the next test's cleanSandbox uninstalls it).
	t.Run("status on a stack whose validators are gone for good exits 4", func(t *testing.T) {
		breakValidators(t, c)
		code, res := statusJSON(t, c)
		if code != cli.ExitNotReady || res.Healthy {
			t.Errorf("exit %d, healthy %v; want %d", code, res.Healthy, cli.ExitNotReady)
		}
		for _, n := range res.Nodes {
			if n.Validated {
				t.Errorf("node %s validated without a validator", n.Name)
			}
		}
		if code, _, _ := gpuctl(t, c, "status", "--wait", "--timeout", "5s"); code != cli.ExitNotReady {
			t.Errorf("status --wait: exit %d", code)
		}
	})
}

// TestDay2Upgrade: from v25.10.1 with the user's values to v26.7.0, through v26.3.3 (NVIDIA's upgrade
// path: TestUpgradePath) — refused in CI without --yes, previewed by --dry-run without a write, then
// done as the preview said; once there, a downgrade is refused and a second upgrade changes nothing.
func TestDay2Upgrade(t *testing.T) {
	t.Parallel()
	s := cleanSandbox(t, day2Scenario)
	c := s.Cluster
	ctx := t.Context()
	// The controller runs of this test (a shared sandbox ran others before).
	runsBefore := len(c.OperatorRuns())
	installedAt(t, s, "v25.10.1")

	t.Run("upgrade in CI without --yes shows the change and refuses it", func(t *testing.T) {
		code, _, stderr := gpuctl(t, c, "upgrade", "--operator-version", "v26.7.0")
		if code != cli.ExitUsage {
			t.Errorf("exit %d, want %d", code, cli.ExitUsage)
		}
		for _, want := range []string{"--yes", "v25.10.1 → v26.7.0", "changed ClusterPolicy cluster-policy", "+++ upgrade ClusterPolicy cluster-policy", "Upgrade notes"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q", want)
			}
		}
		if r := helmRelease(t, c, "gpu-operator"); r.Revision != 1 {
			t.Errorf("gpu-operator at revision %d after a refused upgrade", r.Revision)
		}
	})

	t.Run("upgrade --dry-run previews the change and writes nothing, not even the lock", func(t *testing.T) {
		before, leaseBefore := clusterState(t, c), leaseVersion(t, c)
		dry := upgradeJSON(t, c, "--operator-version", "v26.7.0", "--dry-run")
		if !dry.DryRun || dry.Preview == nil || !dry.Preview.Changed() || dry.Install == nil || dry.Install.Plan == nil || len(dry.Install.Steps) > 0 {
			t.Errorf("dry run: %+v", dry)
		}
		if after := clusterState(t, c); !maps.Equal(before, after) {
			t.Errorf("upgrade --dry-run changed the cluster:\nbefore %v\nafter  %v", before, after)
		}
		if got := leaseVersion(t, c); got != leaseBefore {
			t.Errorf("upgrade --dry-run wrote the lock's Lease (resourceVersion %q → %q)", leaseBefore, got)
		}
	})

	t.Run("upgrade to v26.7.0 switches the real controller, CRDs first, does what its dry run said, and keeps the user's values", func(t *testing.T) {
		before := map[string]int{}
		for _, name := range []string{"gpu-operator", "node-feature-discovery"} {
			before[name] = helmRelease(t, c, name).Revision
		}
		dry := upgradeJSON(t, c, "--operator-version", "v26.7.0", "--dry-run")
		res := upgradeJSON(t, c, "--operator-version", "v26.7.0", "--yes", "--accept-value-changes")
		var order []string
		for _, s := range res.Install.Steps {
			order = append(order, s.ID)
			if s.ID == "crds" && !strings.Contains(s.Message, "updated") {
				t.Errorf("CRD step: %s", s.Message)
			}
		}
		if crds, op := slices.Index(order, "crds"), slices.Index(order, "release-gpu-operator"); crds < 0 || op < crds {
			t.Errorf("step order %v: CRDs must come before the chart", order)
		}
		crd, err := apiextensionsclient.NewForConfigOrDie(c.Config).ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "clusterpolicies.nvidia.com", metav1.GetOptions{})
		if err != nil || crd.Annotations[kube.CRDVersionAnnotation] != "v26.7.0" {
			t.Errorf("ClusterPolicy CRD after the upgrade: %v, annotations %v", err, crd.Annotations)
		}
		// The dry run's preview is what the run then does: the same releases move, the same objects change.
		if !reflect.DeepEqual(res.Preview.Releases, dry.Preview.Releases) {
			t.Errorf("the run moved releases %+v; the dry run said %+v", res.Preview.Releases, dry.Preview.Releases)
		}
		if got, want := diffObjects(res.Preview.Diffs), diffObjects(dry.Preview.Diffs); !slices.Equal(got, want) {
			t.Errorf("the run changed objects %v; the dry run said %v", got, want)
		}
		if want := []string{"v25.10.1", "v26.3.3", "v26.7.0"}; !slices.Equal(res.Path, want) || len(res.Hops) != 2 {
			t.Errorf("path %v in %d hops, want %v in 2", res.Path, len(res.Hops), want)
		}
		// One Helm revision per hop that changes a release.
		moves := map[string]int{}
		for _, h := range res.Hops {
			for _, r := range h.Preview.Releases {
				if r.Outcome != release.Unchanged {
					moves[r.Name]++
				}
			}
		}
		for _, r := range res.Preview.Releases {
			if want := before[r.Name] + moves[r.Name]; helmRelease(t, c, r.Name).Revision != want {
				t.Errorf("release %s: revision %d, want %d", r.Name, helmRelease(t, c, r.Name).Revision, want)
			}
		}
		if r := helmRelease(t, c, "gpu-operator"); r.AppVersion != "v26.7.0" && r.AppVersion != "26.7.0" {
			t.Errorf("gpu-operator app version %s", r.AppVersion)
		}
		vals := normalize(t, helmRelease(t, c, "gpu-operator").Values)
		if ds, _ := vals["daemonsets"].(map[string]any); ds == nil || ds["labels"].(map[string]any)["team"] != "gpu" {
			t.Errorf("the user's --set daemonsets.labels.team=gpu is gone: %v", vals["daemonsets"])
		}
		if !slices.Equal(res.Install.GPUNodes, simulatedGPUNodes(c)) {
			t.Errorf("validated %v", res.Install.GPUNodes)
		}
		// The operator's upgrade controller replaced the drivers and gave the nodes back.
		for _, n := range res.Install.GPUNodes {
			if st := res.DriverUpgrades[n]; st != "upgrade-done" && st != "" {
				t.Errorf("node %s driver upgrade state %q", n, st)
			}
			node, err := c.Kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil || node.Spec.Unschedulable {
				t.Errorf("node %s still cordoned after the upgrade (%v)", n, err)
			}
		}
		assertReconciled(t, c, "cluster-policy")
		runs := c.OperatorRuns()[runsBefore:]
		var releases []string
		for _, r := range runs {
			releases = append(releases, r.Release)
			if r.ExitErr != "" || !r.FromSources {
				t.Errorf("controller run %+v", r)
			}
		}
		if len(runs) < 2 || runs[0].Release != "v25.10.1" || runs[len(runs)-1].Release != "v26.7.0" || !runs[len(runs)-1].Exited.IsZero() {
			t.Errorf("controller runs %v: want v25.10.1's, then v26.7.0's still running", releases)
		}
		if code, st := statusJSON(t, c, healthyWait()...); code != 0 || st.Record.OperatorVersion != "v26.7.0" || st.Record.Command != "upgrade" {
			t.Errorf("status after the upgrade: exit %d, record %+v", code, st.Record)
		}
	})

	t.Run("a downgrade is refused without --force, before anything is written", func(t *testing.T) {
		upgradedTo(t, c, "v26.7.0")
		before := clusterState(t, c)
		code, _, stderr := gpuctl(t, c, "upgrade", "--operator-version", "v25.10.1", "--yes")
		if code != cli.ExitUsage || !strings.Contains(stderr, "--force") {
			t.Errorf("exit %d: %s", code, stderr)
		}
		assertUnchanged(t, before, clusterState(t, c))
	})

	t.Run("a second upgrade changes nothing and needs no --yes", func(t *testing.T) {
		upgradedTo(t, c, "v26.7.0")
		res := upgradeJSON(t, c, "--operator-version", "v26.7.0")
		if res.Install.Changed || res.Preview.Changed() || len(res.Preview.Diffs) > 0 {
			t.Errorf("changed %v, preview %+v", res.Install.Changed, res.Preview.Releases)
		}
	})
}

// TestDay2Uninstall: uninstall gives the nodes back exactly, a second one changes nothing, an install
// after it succeeds; a finalizer on the ClusterPolicy stops it with its name; and uninstall --purge
// leaves the cluster as it was before the first install. Each subtest brings the stack to the state it
// starts from itself (installedAt is a no-op on an installed stack; uninstalled likewise).
func TestDay2Uninstall(t *testing.T) {
	t.Parallel()
	s := cleanSandbox(t, day2Scenario)
	c := s.Cluster
	ctx := t.Context()

	t.Run("uninstall gives the nodes their labels and taints back exactly", func(t *testing.T) {
		installedAt(t, s, "v25.10.1")
		if code, _, stderr := gpuctl(t, c, "uninstall"); code != cli.ExitUsage || !strings.Contains(stderr, "--yes") {
			t.Errorf("uninstall without --yes and without a terminal: exit %d, %s", code, stderr)
		}
		code, res, stderr := uninstallJSON(t, c, "--yes")
		if code != 0 || !res.Changed {
			t.Fatalf("exit %d, changed %v: %s", code, res.Changed, stderr)
		}
		if after := nodesMetadata(t, c); !reflect.DeepEqual(s.nodes, after) {
			t.Errorf("nodes before install:\n%v\nafter uninstall:\n%v", s.nodes, after)
		}
		if code, _ := statusJSON(t, c); code != cli.ExitNotInstalled {
			t.Errorf("status after uninstall: exit %d", code)
		}
	})

	t.Run("a second uninstall changes nothing", func(t *testing.T) {
		uninstalled(t, s)
		code, res, stderr := uninstallJSON(t, c, "--yes")
		if code != 0 || res.Changed {
			t.Errorf("exit %d, changed %v: %s", code, res.Changed, stderr)
		}
	})

	t.Run("install after uninstall succeeds", func(t *testing.T) {
		uninstalled(t, s)
		res := installedAt(t, s, "v25.10.1")
		if !res.Changed {
			t.Errorf("the install after uninstall changed nothing: %+v", res.Steps)
		}
		assertReconciled(t, c, res.Plan.Step("wait-clusterpolicy").Target)
	})

	t.Run("a finalizer on the ClusterPolicy stops uninstall with its name", func(t *testing.T) {
		installedAt(t, s, "v25.10.1")
		cps := dynamicClient(t, c).Resource(clusterPolicies)
		patch := []byte(`{"metadata":{"finalizers":["example.com/hold"]}}`)
		if _, err := cps.Patch(ctx, "cluster-policy", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			// Let it go whatever happened, so what runs next can delete it.
			_, err := cps.Patch(context.Background(), "cluster-policy", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("remove the finalizer: %v", err)
			}
		})
		code, _, stderr := uninstallJSON(t, c, "--yes", "--purge", "--finalizer-wait", "5s")
		if code == 0 {
			t.Fatal("uninstall succeeded with a finalizer holding the ClusterPolicy")
		}
		for _, want := range []string{"ClusterPolicy cluster-policy", "example.com/hold", "kubectl patch clusterpolicy cluster-policy"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q", want)
			}
		}
		// What the hint says: once the finalizer is gone, uninstall again finishes the job.
		if _, err := cps.Patch(ctx, "cluster-policy", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if code, res, stderr := uninstallJSON(t, c, "--yes"); code != 0 || !res.Changed {
			t.Errorf("uninstall after the finalizer was removed: exit %d, changed %v: %s", code, res.Changed, stderr)
		}
	})

	t.Run("uninstall --purge leaves the cluster as it was before the first install", func(t *testing.T) {
		installedAt(t, s, "v25.10.1")
		code, _, stderr := uninstallJSON(t, c, "--yes", "--purge")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		assertUnchanged(t, s.state, clusterState(t, c))
		if after := nodesMetadata(t, c); !reflect.DeepEqual(s.nodes, after) {
			t.Errorf("nodes before install:\n%v\nafter uninstall --purge:\n%v", s.nodes, after)
		}
		if rec, err := record.Read(ctx, c.Kube); err != nil || rec != nil {
			t.Errorf("install record after --purge: %+v, %v", rec, err)
		}
		if _, err := c.Kube.CoordinationV1().Leases("kube-system").Get(ctx, "gpuctl", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the lock's Lease after --purge: %v", err)
		}
	})
}

// TestUpgradeAndUninstallOnOpenShift is day 2 on the OLM path. Upgrade as NVIDIA's and Red Hat's
// guides do it: the Subscription moves to the new release's channel, gpuctl approves exactly that
// InstallPlan, OLM replaces the CSV (and with it the operator Deployment, so the sandbox runs the new
// release's real controller), and the ClusterPolicy is re-applied from the new CSV. Then uninstall:
// the ClusterPolicy, NVIDIA's certified operator (Subscription and CSV), the NodeFeatureDiscovery
// instance and Red Hat's NFD Operator, then gpuctl's taints and the labels NFD and the operator left.
func TestUpgradeAndUninstallOnOpenShift(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "openshift", GPUNodes: 2, CPUNodes: 1}})
	ctx := t.Context()
	nodesBefore := nodesMetadata(t, c)
	installJSON(t, c, "--operator-version", "v25.10.1")
	dyn := dynamicClient(t, c)
	subscriptions := schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "subscriptions"}
	csvs := schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "clusterserviceversions"}

	t.Run("upgrade moves the Subscription, OLM replaces the CSV, the new controller runs", func(t *testing.T) {
		res := upgradeJSON(t, c, "--operator-version", "v26.7.0", "--yes", "--accept-value-changes")
		if res.Preview == nil || res.Preview.From != "v25.10.1" || res.Preview.To != "v26.7.0" || !res.Preview.Changed() {
			t.Errorf("preview %+v", res.Preview)
		}
		sub, err := dyn.Resource(subscriptions).Namespace("nvidia-gpu-operator").Get(ctx, "gpu-operator-certified", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		channel, _, _ := unstructured.NestedString(sub.Object, "spec", "channel")
		installed, _, _ := unstructured.NestedString(sub.Object, "status", "installedCSV")
		if channel != "v26.7" || installed != "gpu-operator-certified.v26.7.0" {
			t.Errorf("Subscription channel %q, installed CSV %q", channel, installed)
		}
		list, err := dyn.Resource(csvs).Namespace("nvidia-gpu-operator").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, o := range list.Items {
			names = append(names, o.GetName())
		}
		if !slices.Equal(names, []string{"gpu-operator-certified.v26.7.0"}) {
			t.Errorf("CSVs after the upgrade: %v (the replaced one must be gone)", names)
		}
		runs := c.OperatorRuns()
		if len(runs) < 2 || runs[0].Release != "v25.10.1" || runs[len(runs)-1].Release != "v26.7.0" || !runs[len(runs)-1].Exited.IsZero() {
			t.Errorf("controller runs %+v: want v25.10.1's, then v26.7.0's still running", runs)
		}
		assertReconciled(t, c, "gpu-cluster-policy")
		if code, st := statusJSON(t, c); code != 0 || st.Record == nil || st.Record.OperatorVersion != "v26.7.0" {
			t.Errorf("status after the upgrade: exit %d, record %+v", code, st.Record)
		}
	})
	t.Run("a second upgrade changes nothing", func(t *testing.T) {
		upgradedTo(t, c, "v26.7.0")
		res := upgradeJSON(t, c, "--operator-version", "v26.7.0")
		if res.Install.Changed || res.Preview.Changed() {
			t.Errorf("changed %v, preview %+v", res.Install.Changed, res.Preview.Releases)
		}
	})

	// Last: from whichever release the subtests before it left.
	t.Run("uninstall removes the certified operator, Red Hat's NFD Operator and their objects, and gives the nodes back", func(t *testing.T) {
		openshiftUninstall(t, c, nodesBefore)
	})
}

// openshiftUninstall uninstalls on the OLM path and checks that the Subscriptions, CSVs, the
// NodeFeatureDiscovery instance, the ClusterPolicy and the operators' Deployments are gone, and the
// nodes are as they were (nodesBefore).
func openshiftUninstall(t *testing.T, c *sandbox.Cluster, nodesBefore map[string]nodeMetadata) {
	t.Helper()
	ctx := t.Context()
	dyn := dynamicClient(t, c)
	code, res, stderr := uninstallJSON(t, c, "--yes")
	if code != 0 || !res.Changed {
		t.Fatalf("exit %d, changed %v: %s", code, res.Changed, stderr)
	}
	if after := nodesMetadata(t, c); !reflect.DeepEqual(nodesBefore, after) {
		t.Errorf("nodes before install:\n%v\nafter uninstall:\n%v", nodesBefore, after)
	}
	for _, gvr := range []schema.GroupVersionResource{
		{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "subscriptions"},
		{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "clusterserviceversions"},
		{Group: "nfd.openshift.io", Version: "v1", Resource: "nodefeaturediscoveries"},
		clusterPolicies,
	} {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list %s: %v", gvr.Resource, err)
		}
		for _, o := range list.Items {
			if ns := o.GetNamespace(); ns == "" || ns == "nvidia-gpu-operator" || ns == "openshift-nfd" {
				t.Errorf("%s %s/%s is left after uninstall", gvr.Resource, ns, o.GetName())
			}
		}
	}
	for _, ns := range []string{"nvidia-gpu-operator", "openshift-nfd"} {
		deps, err := c.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range deps.Items {
			t.Errorf("Deployment %s/%s is left after uninstall", ns, d.Name)
		}
	}
}

// TestUninstallOnGKEAndTKGS is uninstall on the two platforms whose install adds more than the
// releases: Google's driver installer on GKE; on TKGS the NVIDIA AI Enterprise Secrets, here in a
// namespace the user made beforehand (as NVIDIA's NVAIE guide has them do), so gpuctl found it.
// Plain uninstall gives the nodes back byte for byte and leaves only what --purge removes; --purge
// leaves the cluster as it was, the found namespace included.
func TestUninstallOnGKEAndTKGS(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		distro string
		env    map[string]string
		// found is a namespace that exists before the install.
		found string
		// installed are the releases the install must have made, so the test covers their removal.
		installed []string
		// objects are the Secrets gpuctl makes in the found namespace.
		objects []string
		// terminal: upgrade and uninstall run on a terminal (tmux), where they ask first.
		terminal bool
	}{
		// GKE's profile adds a ResourceQuota for the operands' system-node-critical priority class.
		{distro: "gke", installed: []string{"gpu-operator", "node-feature-discovery", "gke-driver-installer-cos"}, objects: []string{"gpu-operator-quota"}, terminal: true},
		{distro: "tkgs", env: nvaieInputs(t), found: "gpu-operator", installed: []string{"gpu-operator", "node-feature-discovery"},
			objects: []string{"licensing-config", "ngc-secret"}},
	} {
		t.Run(tc.distro, func(t *testing.T) {
			c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: tc.distro, GPUNodes: 2, CPUNodes: 1}})
			ctx := t.Context()
			if tc.found != "" {
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tc.found, Labels: map[string]string{"team": "gpu"}}}
				if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			stateBefore := clusterState(t, c)
			nodesBefore := nodesMetadata(t, c)
			if code, _, stderr := gpuctlEnv(t, c, tc.env, "install"); code != 0 {
				t.Fatalf("install exited %d:\n%s", code, stderr)
			}
			for _, name := range tc.installed {
				helmRelease(t, c, name)
			}
			rec, err := record.Read(ctx, c.Kube)
			if err != nil || rec == nil {
				t.Fatalf("install record: %+v, %v", rec, err)
			}
			if tc.found != "" && slices.Contains(record.CreatedNames(rec.Namespaces), tc.found) {
				t.Errorf("the record says gpuctl created namespace %s, which it found", tc.found)
			}
			if got := record.CreatedNames(rec.Objects); !slices.Equal(got, tc.objects) {
				t.Errorf("the record says gpuctl created objects %v, want %v", got, tc.objects)
			}

			if tc.terminal {
				uninstallOnATerminal(t, c)
			} else if code, res, stderr := uninstallJSON(t, c, "--yes"); code != 0 || !res.Changed {
				t.Fatalf("uninstall: exit %d, changed %v: %s", code, res.Changed, stderr)
			}
			if after := nodesMetadata(t, c); !reflect.DeepEqual(nodesBefore, after) {
				t.Errorf("nodes before install:\n%v\nafter uninstall:\n%v", nodesBefore, after)
			}
			// What is left is only what --purge removes: in the namespaces gpuctl created, in the objects
			// and CRDs it created, and the found namespace's labels.
			rec, err = record.Read(ctx, c.Kube)
			if err != nil || rec == nil || !rec.Uninstalled {
				t.Fatalf("install record after uninstall: %+v, %v", rec, err)
			}
			purgeable := map[string]bool{}
			for _, name := range record.CreatedNames(rec.CRDs) {
				purgeable["customresourcedefinitions//"+name] = true
			}
			for _, o := range rec.Objects {
				if o.Created {
					purgeable[strings.ToLower(o.Kind)+"s/"+o.Namespace+"/"+o.Name] = true
				}
			}
			created := record.CreatedNames(rec.Namespaces)
			if tc.found != "" {
				purgeable["namespaces//"+tc.found] = true // its Pod Security labels
			}
			after := clusterState(t, c)
			for k, v := range after {
				if stateBefore[k] == v || purgeable[k] {
					continue
				}
				parts := strings.SplitN(k, "/", 3)
				if slices.Contains(created, parts[1]) || (parts[0] == "namespaces" && slices.Contains(created, parts[2])) {
					continue
				}
				t.Errorf("left after uninstall, and --purge would not remove it: %s", k)
			}
			for k := range stateBefore {
				if _, ok := after[k]; !ok {
					t.Errorf("uninstall deleted %s, which was there before the install", k)
				}
			}
			dss, err := c.Kube.AppsV1().DaemonSets("gpu-operator").List(ctx, metav1.ListOptions{})
			if err != nil || len(dss.Items) > 0 {
				t.Errorf("DaemonSets left in gpu-operator after uninstall: %v (%v)", dss, err)
			}
			deps, err := c.Kube.AppsV1().Deployments("gpu-operator").List(ctx, metav1.ListOptions{})
			if err != nil || len(deps.Items) > 0 {
				t.Errorf("Deployments left in gpu-operator after uninstall: %v (%v)", deps, err)
			}
			helmRecords, err := c.Kube.CoreV1().Secrets("gpu-operator").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
			if err != nil || len(helmRecords.Items) > 0 {
				t.Errorf("Helm release records left in gpu-operator after uninstall: %d (%v)", len(helmRecords.Items), err)
			}

			code, res, stderr := uninstallJSON(t, c, "--yes", "--purge")
			t.Logf("uninstall --purge: %+v", res.Steps)
			if code != 0 {
				t.Fatalf("uninstall --purge: exit %d: %s", code, stderr)
			}
			after = clusterState(t, c)
			if tc.found != "" {
				// Its labels went back to the user's (gpuctl's apply and their removal changed its
				// resourceVersion, so compare what it says instead).
				ns, err := c.Kube.CoreV1().Namespaces().Get(ctx, tc.found, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("uninstall --purge deleted namespace %s, which it found: %v", tc.found, err)
				}
				if want := map[string]string{"team": "gpu", "kubernetes.io/metadata.name": tc.found}; !reflect.DeepEqual(ns.Labels, want) {
					t.Errorf("namespace %s labels %v after --purge, want %v; managed fields %v", tc.found, ns.Labels, want, ns.ManagedFields)
				}
				delete(after, "namespaces//"+tc.found)
				delete(stateBefore, "namespaces//"+tc.found)
			}
			assertUnchanged(t, stateBefore, after)
			if after := nodesMetadata(t, c); !reflect.DeepEqual(nodesBefore, after) {
				t.Errorf("nodes before install:\n%v\nafter uninstall --purge:\n%v", nodesBefore, after)
			}
			if rec, err := record.Read(ctx, c.Kube); err != nil || rec != nil {
				t.Errorf("install record after --purge: %+v, %v", rec, err)
			}
		})
	}
}

// uninstallOnATerminal is a person at a terminal: upgrade shows its change and asks, and a "no"
// changes nothing; uninstall asks, a "no" changes nothing, a "yes" uninstalls.
func uninstallOnATerminal(t *testing.T, c *sandbox.Cluster) {
	t.Helper()
	bin, err := gpuctlBinary()
	if err != nil {
		t.Fatal(err)
	}
	before := helmRelease(t, c, "gpu-operator").Revision
	dir := t.TempDir()
	// Each command's exit code is printed after it, so the screen shows how it ended.
	script := fmt.Sprintf("cd %[1]s && %[2]s upgrade --set daemonsets.labels.team=gpu; echo upgrade-exit=$?; "+
		"%[2]s uninstall; echo first-uninstall-exit=$?; %[2]s uninstall; echo second-uninstall-exit=$?; sleep 600", dir, bin)
	term := newTerminal(t, []string{"KUBECONFIG=" + c.Kubeconfig, "TERM=xterm-256color", "HOME=" + dir, "PATH=/usr/bin:/bin"}, "sh", "-c", script)

	term.waitFor(3*time.Minute, "Upgrade? [y/N]")
	term.keys("n", "Enter")
	term.waitFor(time.Minute, "not confirmed: nothing was changed", "upgrade-exit=1")
	if r := helmRelease(t, c, "gpu-operator"); r.Revision != before {
		t.Errorf("gpu-operator at revision %d after an upgrade the user declined (was %d)", r.Revision, before)
	}

	term.waitFor(time.Minute, "Uninstall the GPU stack gpuctl installed? [y/N]")
	term.keys("n", "Enter")
	term.waitFor(time.Minute, "first-uninstall-exit=1")
	if rec, err := record.Read(t.Context(), c.Kube); err != nil || rec == nil || rec.Uninstalled {
		t.Fatalf("the install record after a declined uninstall: %+v, %v", rec, err)
	}
	helmRelease(t, c, "gpu-operator")
	term.waitFor(time.Minute, "Uninstall the GPU stack gpuctl installed? [y/N]")
	term.keys("y", "Enter")
	term.waitFor(5*time.Minute, "second-uninstall-exit=0")
}

// leaseVersion is the resourceVersion of gpuctl's install lock Lease ("" when there is none).
func leaseVersion(t *testing.T, c *sandbox.Cluster) string {
	t.Helper()
	l, err := c.Kube.CoordinationV1().Leases(lock.DefaultNamespace).Get(t.Context(), lock.DefaultName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return l.ResourceVersion
}

// diffObjects names the objects of an upgrade preview's diffs, with their change.
func diffObjects(diffs []render.ObjectDiff) []string {
	var out []string
	for _, d := range diffs {
		out = append(out, d.Release+" "+d.Change+" "+d.Object)
	}
	return out
}
