package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
)

// installPlanDoc is the document `gpuctl install --dry-run -o json` prints (docs/schemas/Plan.json),
// read by its documented field names rather than through gpuctl's Go types, as a pipeline reads it.
type installPlanDoc struct {
	Kind   string            `json:"kind"`
	Writes *installWritesDoc `json:"writes"`
}

type installWritesDoc struct {
	Objects     []writtenObject `json:"objects"`
	Deletes     []writtenObject `json:"deletes"`
	Bookkeeping []writtenObject `json:"bookkeeping"`
	CRDs        []struct {
		Name   string `json:"name"`
		Action string `json:"action"`
	} `json:"crds"`
	Releases []struct {
		Name         string `json:"name"`
		Namespace    string `json:"namespace"`
		Operation    string `json:"operation"`
		Revision     int    `json:"revision"`
		FromRevision int    `json:"fromRevision"`
	} `json:"releases"`
	Nodes    []taintDocChange `json:"nodes"`
	NodeRule string           `json:"nodeRule"`
}

type writtenObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Action     string `json:"action"`
	// UID is a delete's: the object deleted only while it has it.
	UID types.UID `json:"uid"`
}

// objectKey names an object by group, kind, namespace and name (the version aside: one object is
// served at several).
func objectKey(apiVersion, kind, namespace, name string) string {
	group := ""
	if i := strings.Index(apiVersion, "/"); i >= 0 {
		group = apiVersion[:i]
	}
	return kind + "." + group + " " + namespace + "/" + name
}

// objectState is one object as the API server holds it: its UID, and what gpuctl's and Helm's field
// managers ("gpuctl", "helm") last wrote to it (manager, operation, subresource and time of each of
// their managedFields entries; "" when neither ever wrote it). A write by either changes writes: the
// API server stamps the entry of the manager that changed the object, and leaves a no-op alone.
type objectState struct {
	uid    types.UID
	writes string
}

// clusterObjects reads every object in the cluster by objectKey, nodes and events aside.
func clusterObjects(t *testing.T, c *sandbox.Cluster) map[string]objectState {
	t.Helper()
	ctx := t.Context()
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		t.Fatal(err)
	}
	dyn := dynamicClient(t, c)
	out := map[string]objectState{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || (gv.Group == "" && r.Name == "nodes") || r.Name == "events" {
				continue
			}
			list, err := dyn.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
				continue
			}
			if err != nil {
				t.Fatalf("list %s: %v", r.Name, err)
			}
			for _, o := range list.Items {
				var writes []string
				for _, m := range o.GetManagedFields() {
					if m.Manager == "gpuctl" || m.Manager == "helm" {
						writes = append(writes, fmt.Sprintf("%s %s %s %v", m.Manager, m.Operation, m.Subresource, m.Time))
					}
				}
				slices.Sort(writes)
				out[objectKey(o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName())] = objectState{uid: o.GetUID(), writes: strings.Join(writes, "; ")}
			}
		}
	}
	return out
}

// managedKeys are the objects of objs that gpuctl or Helm wrote, with what they last wrote, by
// objectKey.
func managedKeys(objs map[string]objectState) map[string]string {
	out := map[string]string{}
	for k, o := range objs {
		if o.writes != "" {
			out[k] = o.writes
		}
	}
	return out
}

// assertWrites checks a run against the writes its dry run listed, object by object, as the API server
// shows them before and after the run: each object listed as created did not exist and now carries
// gpuctl's or Helm's write; one listed as updated is the same object (UID) with a new write of theirs;
// one listed unchanged (or a CRD kept) is the same object with no new write; each delete listed had its
// UID before and is gone after. Nothing else was written by gpuctl or Helm, and nothing they wrote is
// gone unless listed as deleted.
func assertWrites(t *testing.T, w *installWritesDoc, before, after map[string]objectState) {
	t.Helper()
	// An object may be listed twice (a namespace gpuctl applies that a release manifest names too):
	// it is written when either write does.
	rank := map[string]int{"unchanged": 0, "keep": 0, "apply": 1, "update": 2, "create": 3}
	listed := map[string]string{}
	add := func(key, action string) {
		if a, ok := listed[key]; !ok || rank[action] > rank[a] {
			listed[key] = action
		}
	}
	for _, o := range slices.Concat(w.Objects, w.Bookkeeping) {
		add(objectKey(o.APIVersion, o.Kind, o.Namespace, o.Name), o.Action)
	}
	for _, crd := range w.CRDs {
		add(objectKey("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", crd.Name), crd.Action)
	}
	for _, k := range slices.Sorted(maps.Keys(listed)) {
		b, existed := before[k]
		a, exists := after[k]
		switch action := listed[k]; {
		case !exists:
			t.Errorf("%s %s: it does not exist after the run", action, k)
		case a.writes == "" && (action == "create" || action == "update" || action == "apply"):
			t.Errorf("%s %s: neither gpuctl nor Helm wrote it", action, k)
		case action == "create" && existed:
			t.Errorf("create %s: it existed before the run (uid %s, now %s)", k, b.uid, a.uid)
		case (action == "update" || action == "unchanged" || action == "keep") && !existed:
			t.Errorf("%s %s: it did not exist before the run", action, k)
		case (action == "update" || action == "unchanged" || action == "keep") && a.uid != b.uid:
			t.Errorf("%s %s: it was replaced (uid %s, before %s)", action, k, a.uid, b.uid)
		case action == "update" && a.writes == b.writes:
			t.Errorf("update %s: the run did not write it (gpuctl's and Helm's writes still %q)", k, a.writes)
		case (action == "unchanged" || action == "keep") && a.writes != b.writes:
			t.Errorf("%s %s: the run wrote it (gpuctl's and Helm's writes %q, before %q)", action, k, a.writes, b.writes)
		}
	}
	written := managedKeys(after)
	for _, k := range slices.Sorted(maps.Keys(written)) {
		if b, ok := before[k]; ok && b.writes == written[k] && b.uid == after[k].uid {
			continue
		}
		if _, ok := listed[k]; !ok {
			t.Errorf("written but not listed: %s (%s)", k, written[k])
		}
	}
	deletes := map[string]types.UID{}
	for _, d := range w.Deletes {
		k := objectKey(d.APIVersion, d.Kind, d.Namespace, d.Name)
		deletes[k] = d.UID
		if b, ok := before[k]; !ok || b.uid != d.UID {
			t.Errorf("delete %s (uid %s): before the run it was %+v", k, d.UID, b)
		}
		if a, ok := after[k]; ok && a.uid == d.UID {
			t.Errorf("delete %s (uid %s): it is still there after the run", k, d.UID)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(managedKeys(before))) {
		a, ok := after[k]
		if gone := !ok || a.uid != before[k].uid; gone && deletes[k] != before[k].uid && listed[k] != "create" {
			t.Errorf("gone but not listed as deleted: %s (uid %s)", k, before[k].uid)
		}
	}
}

// installDryRun runs `gpuctl install --dry-run -o json` with args and returns the writes it lists.
func installDryRun(t *testing.T, c *sandbox.Cluster, args ...string) *installWritesDoc {
	t.Helper()
	code, stdout, stderr := gpuctl(t, c, append([]string{"install", "--dry-run", "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("install --dry-run exited %d:\n%s", code, stderr)
	}
	var doc installPlanDoc
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("install --dry-run -o json: %v\n%s", err, stdout)
	}
	if doc.Kind != "Plan" || doc.Writes == nil {
		t.Fatalf("install --dry-run -o json: kind %q, no writes:\n%s", doc.Kind, stdout)
	}
	return doc.Writes
}

// TestInstallPlan (gpuctl issue 21): `gpuctl install` writes exactly what its dry run lists. On a
// kubeadm sandbox with GPU nodes, `install --dry-run -o json` lists its writes (objects by kind,
// namespace and name, CRDs, Helm release operations, each node's taint, gpuctl's Lease and record) and
// writes nothing; the install then writes those and nothing else, object by object with the action
// listed (create, update, unchanged), as read back from the API server (each object's UID and the
// writes of gpuctl's and Helm's field managers), from Helm's storage and from the install record, and
// deletes nothing. Objects the operator creates itself are not gpuctl's writes. GPU nodes NFD finds
// during the run are tainted by the plan's rule, which the dry run states, and the run names them. A
// second install with the same flags writes what its dry run lists (gpuctl's own objects, nothing of
// the stack's), and a third that turns a chart value off deletes exactly the objects its dry run lists,
// by UID, and updates those it lists.
func TestInstallPlan(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1}})
	ctx := t.Context()
	crdsBefore := crdNames(t, c)
	taintsBefore := taintsByNode(t, c)
	stateBefore := writableState(t, c)
	before := clusterObjects(t, c)

	w := installDryRun(t, c)
	if code, out, _ := gpuctl(t, c, "install", "--dry-run"); code != 0 || !strings.Contains(out, "Writes:") {
		t.Errorf("install --dry-run (text): exit %d, no summary of its writes:\n%s", code, out)
	} else {
		t.Logf("install --dry-run:\n%s", out[strings.Index(out, "Writes:"):])
	}
	t.Run("the dry run writes nothing", func(t *testing.T) {
		if got, want := managedKeys(clusterObjects(t, c)), managedKeys(before); !maps.Equal(got, want) {
			t.Errorf("objects gpuctl and Helm wrote after the dry run:\n%v\nbefore:\n%v", got, want)
		}
		assertUnchanged(t, stateBefore, writableState(t, c))
		if got := crdNames(t, c); !slices.Equal(got, crdsBefore) {
			t.Errorf("CRDs after the dry run: %v, before: %v", got, crdsBefore)
		}
	})

	code, stdout, stderr := gpuctl(t, c, "install", "-o", "json")
	if code != 0 {
		t.Fatalf("install exited %d:\n%s", code, stderr)
	}
	var res struct {
		TaintedUnlisted []string `json:"taintedUnlisted"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("install -o json: %v\n%s", err, stdout)
	}
	after := clusterObjects(t, c)

	t.Run("each object is written as the dry run listed it (create, update, unchanged), and no other", func(t *testing.T) {
		if len(w.Objects) == 0 {
			t.Fatal("the dry run lists no object: the test would prove nothing")
		}
		assertWrites(t, w, before, after)
	})

	t.Run("a fresh install deletes nothing, and lists no delete", func(t *testing.T) {
		// That nothing gpuctl or Helm wrote is gone, assertWrites checks above.
		if len(w.Deletes) > 0 {
			t.Errorf("the dry run of a fresh install lists deletes: %+v", w.Deletes)
		}
	})

	t.Run("the releases, their manifests and the record are what the dry run listed", func(t *testing.T) {
		rec, err := record.Read(ctx, c.Kube)
		if err != nil || rec == nil {
			t.Fatalf("install record: %v", err)
		}
		flags := genericclioptions.NewConfigFlags(false)
		flags.KubeConfig = &c.Kubeconfig
		var listed, ran, fromManifests []string
		for _, r := range w.Releases {
			listed = append(listed, r.Namespace+"/"+r.Name+" "+r.Operation)
			rc, err := release.New(flags, r.Namespace, nil)
			if err != nil {
				t.Fatal(err)
			}
			last, err := rc.Last(r.Name)
			if err != nil || last == nil {
				t.Errorf("release %s/%s: %v", r.Namespace, r.Name, err)
				continue
			}
			if last.Revision != r.Revision || last.Status != "deployed" {
				t.Errorf("release %s: revision %d %s, the dry run listed revision %d", r.Name, last.Revision, last.Status, r.Revision)
			}
			objs, err := render.DecodeManifest(deployedManifest(t, flags, r.Namespace, r.Name, r.Revision))
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				fromManifests = append(fromManifests, o.GetKind()+" "+o.GetName())
			}
		}
		for _, r := range rec.Releases {
			op := "upgrade"
			if r.Created {
				op = "install"
			}
			ran = append(ran, r.Namespace+"/"+r.Name+" "+op)
		}
		sort.Strings(listed)
		sort.Strings(ran)
		if !slices.Equal(listed, ran) {
			t.Errorf("releases recorded %v, the dry run listed %v", ran, listed)
		}
		// Every object of every release manifest was listed (a manifest may leave the namespace to Helm).
		var objs []string
		for _, o := range w.Objects {
			objs = append(objs, o.Kind+" "+o.Name)
		}
		for _, k := range fromManifests {
			if !slices.Contains(objs, k) {
				t.Errorf("release manifest object %s was not listed", k)
			}
		}
		var crdsListed, crdsRecorded []string
		for _, crd := range w.CRDs {
			if crd.Action == "create" {
				crdsListed = append(crdsListed, crd.Name)
			}
		}
		for _, crd := range rec.CRDs {
			if crd.Created {
				crdsRecorded = append(crdsRecorded, crd.Name)
			}
		}
		sort.Strings(crdsListed)
		sort.Strings(crdsRecorded)
		if !slices.Equal(crdsListed, crdsRecorded) {
			t.Errorf("CRDs recorded as created %v, the dry run listed %v", crdsRecorded, crdsListed)
		}
		if created := without(crdNames(t, c), crdsBefore); !slices.Equal(created, crdsListed) {
			t.Errorf("CRDs created %v, the dry run listed %v", created, crdsListed)
		}
	})

	t.Run("each node's taint is the one listed, or one the plan's rule names and the run reports", func(t *testing.T) {
		listedNodes := map[string]bool{}
		var listedChanges []string
		for _, n := range w.Nodes {
			listedNodes[n.Node] = true
		}
		listedChanges = listed(w.Nodes)
		seen := changesSeen(taintsBefore, taintsByNode(t, c))
		var byRule []string
		var exact []string
		for _, s := range seen {
			node := strings.SplitN(s, " ", 2)[0]
			if listedNodes[node] {
				exact = append(exact, s)
			} else {
				byRule = append(byRule, node)
			}
		}
		if !slices.Equal(exact, listedChanges) {
			t.Errorf("taints changed on listed nodes: %v, listed: %v", exact, listedChanges)
		}
		if len(byRule) > 0 {
			if w.NodeRule == "" {
				t.Errorf("nodes %v were tainted, neither listed nor under a rule the dry run states", byRule)
			}
			sort.Strings(byRule)
			if got := slices.Sorted(slices.Values(res.TaintedUnlisted)); !slices.Equal(got, byRule) {
				t.Errorf("the run reports %v as tainted beyond the dry run's list, want %v", got, byRule)
			}
			for _, n := range byRule {
				if !strings.Contains(stderr, n) {
					t.Errorf("the run's progress does not name node %s, tainted beyond the dry run's list", n)
				}
				node, err := c.Kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if node.Labels["feature.node.kubernetes.io/pci-10de.present"] != "true" {
					t.Errorf("node %s was tainted by the plan's rule, but NFD did not label it a GPU node", n)
				}
			}
		}
		if len(seen) == 0 {
			t.Error("the install tainted no node: the test would prove nothing about taints")
		}
	})

	t.Run("a second install with the same flags writes what its dry run lists", func(t *testing.T) {
		assertRerunAsListed(t, c)
	})

	t.Run("an install that turns NFD's garbage collector off and changes its worker's config deletes and updates what its dry run lists", func(t *testing.T) {
		// node-feature-discovery.gc.enable gates the nfd-gc Deployment and its RBAC, and worker.config
		// is nfd-worker.conf in the worker's ConfigMap, hashed into its DaemonSet's pods
		// (charts/node-feature-discovery/templates): the upgrade of NFD's release deletes the first and
		// updates the second.
		w := assertRerunAsListed(t, c, "--set", "node-feature-discovery.gc.enable=false", "--set", "node-feature-discovery.worker.config.core.sleepInterval=90s")
		var deletes, updates []string
		for _, d := range w.Deletes {
			deletes = append(deletes, d.Kind+" "+d.Namespace+"/"+d.Name)
		}
		for _, o := range w.Objects {
			if o.Action == "update" {
				updates = append(updates, o.Kind+" "+o.Namespace+"/"+o.Name)
			}
		}
		if !slices.Contains(deletes, "Deployment gpu-operator/node-feature-discovery-gc") {
			t.Errorf("the dry run lists deletes %v, want nfd-gc's Deployment among them", deletes)
		}
		if !slices.Contains(updates, "DaemonSet gpu-operator/node-feature-discovery-worker") {
			t.Errorf("the dry run lists updates %v, want nfd-worker's DaemonSet among them", updates)
		}
	})
}

// assertRerunAsListed runs an install over the one there with args, after its dry run, and checks that
// the run writes and deletes what the dry run listed, object by object, makes the release revisions
// it listed, and says it changed the cluster exactly when the dry run listed a change. It returns the
// dry run's writes.
func assertRerunAsListed(t *testing.T, c *sandbox.Cluster, args ...string) *installWritesDoc {
	t.Helper()
	before := clusterObjects(t, c)
	w := installDryRun(t, c, args...)
	var changes []string
	for _, o := range w.Objects {
		if o.Action != "unchanged" {
			changes = append(changes, o.Action+" "+objectKey(o.APIVersion, o.Kind, o.Namespace, o.Name))
		}
	}
	for _, d := range w.Deletes {
		changes = append(changes, "delete "+objectKey(d.APIVersion, d.Kind, d.Namespace, d.Name))
	}
	for _, crd := range w.CRDs {
		if crd.Action != "unchanged" && crd.Action != "keep" {
			changes = append(changes, crd.Action+" CRD "+crd.Name)
		}
	}
	for _, r := range w.Releases {
		if r.Operation != "unchanged" {
			changes = append(changes, r.Operation+" release "+r.Name)
		}
	}
	for _, n := range w.Nodes {
		changes = append(changes, "taint "+n.Node)
	}
	t.Logf("the dry run lists %d change(s): %v; and gpuctl's own: %+v", len(changes), changes, w.Bookkeeping)
	code, stdout, stderr := gpuctl(t, c, append([]string{"install", "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("install exited %d:\n%s", code, stderr)
	}
	assertWrites(t, w, before, clusterObjects(t, c))
	var res struct {
		Changed  bool `json:"changed"`
		Releases []struct {
			Name     string `json:"name"`
			Revision int    `json:"revision"`
		} `json:"releases"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("install -o json: %v\n%s", err, stdout)
	}
	if res.Changed != (len(changes) > 0) {
		t.Errorf("the run changed the cluster: %v; its dry run listed %v", res.Changed, changes)
	}
	for _, r := range w.Releases {
		want := r.Revision
		if r.Operation == "unchanged" {
			want = r.FromRevision
		}
		for _, got := range res.Releases {
			if got.Name == r.Name && got.Revision != want {
				t.Errorf("release %s at revision %d after the run; its dry run listed %s (revision %d)", r.Name, got.Revision, r.Operation, want)
			}
		}
	}
	return w
}

// without is a's elements not in b.
func without(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// deployedManifest is the manifest Helm stored for revision of the release name in ns.
func deployedManifest(t *testing.T, flags *genericclioptions.ConfigFlags, ns, name string, revision int) string {
	t.Helper()
	cfg := action.NewConfiguration()
	if err := cfg.Init(flags, ns, "secret"); err != nil {
		t.Fatal(err)
	}
	r, err := cfg.Releases.Get(name, revision)
	if err != nil {
		t.Fatal(err)
	}
	rel, ok := r.(*releasev1.Release)
	if !ok {
		t.Fatalf("release %s/%s revision %d: %T", ns, name, revision, r)
	}
	return rel.Manifest
}
