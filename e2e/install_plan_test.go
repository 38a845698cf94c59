package e2e

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	Kind   string `json:"kind"`
	Writes *struct {
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
	} `json:"writes"`
}

type writtenObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Action     string `json:"action"`
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

// gpuctlManaged lists every object in the cluster that gpuctl or its Helm writes manage fields of
// (field managers "gpuctl" and "helm"), as objectKey, nodes aside.
func gpuctlManaged(t *testing.T, c *sandbox.Cluster) []string {
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
	var out []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || (gv.Group == "" && r.Name == "nodes") {
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
				for _, m := range o.GetManagedFields() {
					if m.Manager == "gpuctl" || m.Manager == "helm" {
						out = append(out, objectKey(o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName()))
						break
					}
				}
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// TestInstallPlan (gpuctl issue 21): `gpuctl install` writes exactly what its dry run lists. On a
// kubeadm sandbox with GPU nodes, `install --dry-run -o json` lists its writes (objects by kind,
// namespace and name, CRDs, Helm release operations, each node's taint, gpuctl's Lease and record) and
// writes nothing; the install then writes those and nothing else, as read back from the API server
// (every object gpuctl's or Helm's field manager wrote), from Helm's storage and from the install
// record. Objects the operator creates itself are not gpuctl's writes. GPU nodes NFD finds during the
// run are tainted by the plan's rule, which the dry run states, and the run names them.
func TestInstallPlan(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1}})
	ctx := t.Context()
	crdsBefore := crdNames(t, c)
	taintsBefore := taintsByNode(t, c)
	stateBefore := clusterState(t, c)
	managedBefore := gpuctlManaged(t, c)

	code, stdout, stderr := gpuctl(t, c, "install", "--dry-run", "-o", "json")
	if code != 0 {
		t.Fatalf("install --dry-run exited %d:\n%s", code, stderr)
	}
	var doc installPlanDoc
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("install --dry-run -o json: %v\n%s", err, stdout)
	}
	if doc.Kind != "Plan" {
		t.Errorf("install --dry-run -o json: kind %q, want Plan", doc.Kind)
	}
	w := doc.Writes
	if w == nil {
		t.Fatalf("install --dry-run -o json lists no writes:\n%s", stdout)
	}
	if code, out, _ := gpuctl(t, c, "install", "--dry-run"); code != 0 || !strings.Contains(out, "Writes:") {
		t.Errorf("install --dry-run (text): exit %d, no summary of its writes:\n%s", code, out)
	} else {
		t.Logf("install --dry-run:\n%s", out[strings.Index(out, "Writes:"):])
	}
	t.Run("the dry run writes nothing", func(t *testing.T) {
		if got := gpuctlManaged(t, c); !slices.Equal(got, managedBefore) {
			t.Errorf("objects gpuctl manages after the dry run:\n%v\nbefore:\n%v", got, managedBefore)
		}
		if got := clusterState(t, c); len(got) != len(stateBefore) {
			t.Errorf("the dry run changed the cluster: %d objects, %d before", len(got), len(stateBefore))
		}
		if got := crdNames(t, c); !slices.Equal(got, crdsBefore) {
			t.Errorf("CRDs after the dry run: %v, before: %v", got, crdsBefore)
		}
	})

	code, stdout, stderr = gpuctl(t, c, "install", "-o", "json")
	if code != 0 {
		t.Fatalf("install exited %d:\n%s", code, stderr)
	}
	var res struct {
		TaintedUnlisted []string `json:"taintedUnlisted"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("install -o json: %v\n%s", err, stdout)
	}

	t.Run("the objects gpuctl wrote are the ones listed, and no others", func(t *testing.T) {
		var listed []string
		for _, o := range slices.Concat(w.Objects, w.Bookkeeping) {
			if o.Action != "unchanged" {
				listed = append(listed, objectKey(o.APIVersion, o.Kind, o.Namespace, o.Name))
			}
		}
		for _, crd := range w.CRDs {
			if crd.Action != "unchanged" && crd.Action != "keep" {
				listed = append(listed, objectKey("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", crd.Name))
			}
		}
		sort.Strings(listed)
		listed = slices.Compact(listed)
		var written []string
		for _, k := range gpuctlManaged(t, c) {
			if !slices.Contains(managedBefore, k) {
				written = append(written, k)
			}
		}
		if !slices.Equal(written, listed) {
			t.Errorf("written but not listed: %v\nlisted but not written: %v", without(written, listed), without(listed, written))
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

	t.Run("a second dry run lists what a second run then does", func(t *testing.T) {
		code, stdout, stderr := gpuctl(t, c, "install", "--dry-run", "-o", "json")
		if code != 0 {
			t.Fatalf("install --dry-run exited %d:\n%s", code, stderr)
		}
		var again installPlanDoc
		if err := json.Unmarshal([]byte(stdout), &again); err != nil || again.Writes == nil {
			t.Fatalf("install --dry-run -o json: %v\n%s", err, stdout)
		}
		var changes []string
		for _, o := range again.Writes.Objects {
			if o.Action != "unchanged" {
				changes = append(changes, o.Action+" "+objectKey(o.APIVersion, o.Kind, o.Namespace, o.Name))
			}
		}
		for _, crd := range again.Writes.CRDs {
			if crd.Action != "unchanged" && crd.Action != "keep" {
				changes = append(changes, crd.Action+" CRD "+crd.Name)
			}
		}
		for _, r := range again.Writes.Releases {
			if r.Operation != "unchanged" {
				changes = append(changes, r.Operation+" release "+r.Name)
			}
		}
		for _, n := range again.Writes.Nodes {
			changes = append(changes, "taint "+n.Node)
		}
		code, stdout, stderr = gpuctl(t, c, "install", "-o", "json")
		if code != 0 {
			t.Fatalf("install exited %d:\n%s", code, stderr)
		}
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
			t.Errorf("the second run changed the cluster: %v; its dry run listed %v", res.Changed, changes)
		}
		for _, r := range again.Writes.Releases {
			want := r.Revision
			if r.Operation == "unchanged" {
				want = r.FromRevision
			}
			for _, got := range res.Releases {
				if got.Name == r.Name && got.Revision != want {
					t.Errorf("release %s at revision %d after the second run; its dry run listed %s (revision %d)", r.Name, got.Revision, r.Operation, want)
				}
			}
		}
	})
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
