package uninstall

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// Custom resources of NFD: its workers' NodeFeature objects.
var nodeFeaturesGVR = schema.GroupVersionResource{Group: "nfd.k8s-sigs.io", Version: "v1alpha1", Resource: "nodefeatures"}

// ReadReleases reads what RefuseUnrecorded asks, which the engine asks before it takes the lock: the
// install record and, when there is none and o does not adopt, which releases of gpuctl's names are
// installed. With a record (or --adopt) nothing is refused, and it reads no release.
func ReadReleases(ctx context.Context, clients *kube.Clients, o Options) (*Snapshot, error) {
	return newReader(clients).refusal(ctx, o)
}

// Read reads everything an uninstall decides over (see Snapshot), and writes nothing.
func Read(ctx context.Context, clients *kube.Clients, o Options) (*Snapshot, error) {
	return newReader(clients).read(ctx, o)
}

// reader reads a Snapshot through clients, and Helm's releases through helm.
type reader struct {
	clients *kube.Clients
	helm    *release.Clients
}

// newReader reads through clients, and Helm's releases through clients opened from their getter.
func newReader(clients *kube.Clients) *reader {
	return &reader{clients: clients, helm: release.NewClients(clients.Getter)}
}

// read reads the whole snapshot.
func (r *reader) read(ctx context.Context, o Options) (*Snapshot, error) {
	s, err := r.record(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.releases(ctx, s); err != nil {
		return nil, err
	}
	if err := r.rest(ctx, s, o); err != nil {
		return nil, err
	}
	return s, nil
}

// refusal reads what RefuseUnrecorded asks (see ReadReleases).
func (r *reader) refusal(ctx context.Context, o Options) (*Snapshot, error) {
	s, err := r.record(ctx)
	if err != nil || s.Record != nil || o.Adopt {
		return s, err
	}
	return s, r.releases(ctx, s)
}

// record reads the install record, and with it the stack's namespace: the record's, else the
// clients'.
func (r *reader) record(ctx context.Context) (*Snapshot, error) {
	rec, err := record.Read(ctx, r.clients.Kube)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Record: rec, Namespace: r.clients.Namespace}
	if rec != nil && rec.Namespace != "" {
		s.Namespace = rec.Namespace
	}
	return s, nil
}

// releases reads the installed releases of gpuctl's into s: the recorded ones, or (no record) those
// of gpuctl's release names in the clients' namespace, which Build takes only with --adopt. Without a
// record it reads whether each carries gpuctl's release label, for the refusal.
func (r *reader) releases(ctx context.Context, s *Snapshot) error {
	var candidates []InstalledRelease
	if s.Record != nil {
		for _, o := range s.Record.Releases {
			candidates = append(candidates, InstalledRelease{Name: o.Name, Namespace: o.Namespace})
		}
	} else {
		for _, name := range unrecordedNames() {
			candidates = append(candidates, InstalledRelease{Name: name, Namespace: r.clients.Namespace})
		}
	}
	for _, c := range candidates {
		rc, err := r.helm.In(c.Namespace)
		if err != nil {
			return err
		}
		last, err := rc.Last(c.Name)
		if err != nil {
			return err
		}
		if last == nil {
			continue
		}
		if s.Record == nil {
			if c.Gpuctl, err = r.managedRelease(ctx, c); err != nil {
				return err
			}
		}
		s.Releases = append(s.Releases, c)
	}
	return nil
}

// managedRelease says whether the newest revision of release rel carries gpuctl's release label, read
// from Helm's storage Secrets (labelled owner=helm, name=<release>, version=<revision>, and with the
// release's own labels: helm.sh/helm/v4 pkg/storage/driver/secrets.go at v4.3.1).
func (r *reader) managedRelease(ctx context.Context, rel InstalledRelease) (bool, error) {
	sel := labels.SelectorFromSet(labels.Set{"owner": "helm", "name": rel.Name}).String()
	secrets, err := r.clients.Kube.CoreV1().Secrets(rel.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return false, fmt.Errorf("read release %s's revisions: %w", rel.Name, err)
	}
	newest, managed := -1, false
	for _, s := range secrets.Items {
		if v, err := strconv.Atoi(s.Labels["version"]); err == nil && v > newest {
			newest, managed = v, s.Labels[detect.ManagedReleaseLabel] == "true"
		}
	}
	return managed, nil
}

// rest reads the rest of the snapshot: the releases' manifests, the stack's custom resources, NFD's
// NodeFeatures, the nodes (when gpuctl may give labels back), the taints gpuctl added, the kinds the
// API server serves, and with --purge (and a record) what the purge decides over.
func (r *reader) rest(ctx context.Context, s *Snapshot, o Options) error {
	for i, rel := range s.Releases {
		rc, err := r.helm.In(rel.Namespace)
		if err != nil {
			return err
		}
		if s.Releases[i].Manifest, err = rc.Manifest(rel.Name); err != nil {
			return err
		}
	}
	refs, objs, err := record.ListStackResources(ctx, r.clients.Dynamic)
	if err != nil {
		return err
	}
	for i := range refs {
		s.Stack = append(s.Stack, StackObject{Ref: refs[i], Object: objs[i]})
	}
	if s.NodeFeatures, err = r.nodeFeatures(ctx, s.Releases); err != nil {
		return err
	}
	if nfd, operator := whose(s.Record, o.Adopt); nfd || operator {
		nodes, err := r.clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list nodes: %w", err)
		}
		s.Nodes = nodes.Items
	}
	tainted, err := (&taint.Untaint{Client: r.clients.Kube, DryRun: true}).Run(ctx, nil)
	if err != nil {
		return err
	}
	s.Tainted = tainted.Changed()
	s.Mappings, s.Served = r.mappings(s), r.served()
	if o.Purge && s.Record != nil {
		s.Purge, err = r.purge(ctx, s)
	}
	return err
}

// nodeFeatures lists the NodeFeature objects in the namespace of each NFD release: NFD's workers
// leave one per node (kubernetes-sigs/node-feature-discovery docs/usage/custom-resources.md).
func (r *reader) nodeFeatures(ctx context.Context, rels []InstalledRelease) (map[string][]Ref, error) {
	out := map[string][]Ref{}
	for _, rel := range rels {
		if roleOf(rel.Name) != RoleNFD {
			continue
		}
		list, err := r.clients.Dynamic.Resource(nodeFeaturesGVR).Namespace(rel.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil && !kube.Absent(err) {
			return nil, fmt.Errorf("list NodeFeature objects in %s: %w", rel.Namespace, err)
		}
		if list == nil {
			continue
		}
		for _, o := range list.Items {
			out[rel.Name] = append(out[rel.Name], Ref{Namespace: o.GetNamespace(), Name: o.GetName(), UID: o.GetUID()})
		}
	}
	return out, nil
}

// mappings are the REST mappings of the kinds in the releases' manifests and of the stack's custom
// resources (NodeFeature included), as the clients' mapper knows them; none without a mapper. A manifest that
// does not decode names no kinds here: Permissions says so.
func (r *reader) mappings(s *Snapshot) map[schema.GroupVersionKind]Mapping {
	out := map[schema.GroupVersionKind]Mapping{}
	if r.clients.Mapper == nil {
		return out
	}
	add := func(gvk schema.GroupVersionKind) {
		if _, ok := out[gvk]; ok {
			return
		}
		if m, err := r.clients.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			out[gvk] = Mapping{Resource: m.Resource, Namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}
		}
	}
	for _, rel := range s.Releases {
		objs, _ := render.DecodeManifest(rel.Manifest)
		for _, o := range objs {
			add(o.GroupVersionKind())
		}
	}
	for _, r := range record.StackResources() {
		add(r.GVR.GroupVersion().WithKind(r.Kind))
	}
	add(nodeFeaturesGVR.GroupVersion().WithKind("NodeFeature"))
	return out
}

// served says which kinds of dependentResources the API server serves.
func (r *reader) served() map[schema.GroupVersionResource]bool {
	out := map[schema.GroupVersionResource]bool{}
	namespaced, cluster := dependentResources()
	for _, gvr := range append(namespaced, cluster...) {
		out[gvr] = served(r.clients.Mapper, gvr)
	}
	return out
}

// served says whether the cluster serves gvr, as its RESTMapper (discovery) knows; without a mapper
// every kind counts as served.
func served(mapper meta.RESTMapper, gvr schema.GroupVersionResource) bool {
	if mapper == nil {
		return true
	}
	_, err := mapper.KindFor(gvr)
	return err == nil
}

// installedCSVs names the ClusterServiceVersions the Subscriptions in namespace ns installed (none
// when they cannot be listed).
func installedCSVs(ctx context.Context, dyn dynamic.Interface, ns string) []string {
	subs, err := dyn.Resource(kube.SubscriptionsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var csvs []string
	for _, s := range subs.Items {
		if csv, _, _ := unstructured.NestedString(s.Object, "status", "installedCSV"); csv != "" {
			csvs = append(csvs, csv)
		}
	}
	return csvs
}
