package step

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// recordBefore is what existed before a run's first write: the record is written from it and from
// what exists after, so "created" means created by gpuctl.
type recordBefore struct {
	prev       *record.Record
	crds       map[string]bool
	namespaces map[string]bool
	releases   map[string]bool // namespace/name
	objects    map[record.Object]bool
	nodes      map[string]record.NodeMetadata
	// customResources are the UIDs of the stack's custom resources (ClusterPolicy, NVIDIADriver,
	// NodeFeatureDiscovery) that existed before the run: none of them is the run's.
	customResources map[types.UID]bool
}

// recordedOf is what the record names of the plan's writes outside Helm releases: each step's kind
// says (Kind.Recorded); skipped steps write nothing.
func recordedOf(p *plan.Plan) (Recorded, error) {
	steps, err := running(p)
	if err != nil {
		return Recorded{}, err
	}
	var out Recorded
	for _, sk := range steps {
		r, err := sk.k.Recorded(sk.s)
		if err != nil {
			return Recorded{}, err
		}
		out.CRDs = append(out.CRDs, r.CRDs...)
		out.Namespaces = append(out.Namespaces, r.Namespaces...)
		out.Objects = append(out.Objects, r.Objects...)
	}
	return out, nil
}

// objectExists reads an object the record names; a kind the cluster does not serve has none.
func objectExists(ctx context.Context, clients *kube.Clients, o record.Object) (bool, error) {
	uid, err := record.UIDNow(ctx, clients, o)
	return uid != "", err
}

// snapshotBefore reads what the record needs to know of the cluster before the first write.
func (x *executor) snapshotBefore(ctx context.Context) (*recordBefore, error) {
	prev, err := record.Read(ctx, x.clients.Kube)
	if err != nil {
		return nil, err
	}
	b := &recordBefore{prev: prev}
	planned, err := recordedOf(x.plan)
	if err != nil {
		return nil, err
	}
	if b.crds, err = x.crdsBefore(ctx, planned.CRDs); err != nil {
		return nil, err
	}
	if b.namespaces, err = x.namespacesBefore(ctx, planned.Namespaces); err != nil {
		return nil, err
	}
	if b.releases, err = x.releasesBefore(); err != nil {
		return nil, err
	}
	if b.objects, err = x.objectsBefore(ctx, planned.Objects); err != nil {
		return nil, err
	}
	if b.customResources, err = x.customResourcesBefore(ctx); err != nil {
		return nil, err
	}
	if b.nodes, err = x.nodesBefore(ctx, prev); err != nil {
		return nil, err
	}
	return b, nil
}

// crdsBefore says which of the plan's CRDs exist.
func (x *executor) crdsBefore(ctx context.Context, crds []string) (map[string]bool, error) {
	exist := map[string]bool{}
	for _, name := range crds {
		_, err := x.clients.Extensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("read CRD %s: %w", name, err)
		}
		exist[name] = err == nil
	}
	return exist, nil
}

// namespacesBefore says which of the plan's namespaces exist.
func (x *executor) namespacesBefore(ctx context.Context, namespaces []string) (map[string]bool, error) {
	exist := map[string]bool{}
	for _, ns := range namespaces {
		_, err := x.clients.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("read namespace %s: %w", ns, err)
		}
		exist[ns] = err == nil
	}
	return exist, nil
}

// releasesBefore says which of the plan's releases exist, by namespace/name.
func (x *executor) releasesBefore() (map[string]bool, error) {
	exist := map[string]bool{}
	for _, r := range x.plan.RunningReleases() {
		ns := x.plan.ReleaseNamespace(r)
		rc, err := x.releaseClient(ns)
		if err != nil {
			return nil, err
		}
		last, err := rc.Last(r.Name)
		if err != nil {
			return nil, err
		}
		exist[ns+"/"+r.Name] = last != nil
	}
	return exist, nil
}

// objectsBefore says which of the plan's other objects exist.
func (x *executor) objectsBefore(ctx context.Context, objects []record.Object) (map[record.Object]bool, error) {
	exist := map[record.Object]bool{}
	for _, o := range objects {
		found, err := objectExists(ctx, x.clients, o)
		if err != nil {
			return nil, fmt.Errorf("read %s %s/%s: %w", o.Kind, o.Namespace, o.Name, err)
		}
		exist[o] = found
	}
	return exist, nil
}

// customResourcesBefore are the UIDs of the stack's custom resources that exist.
func (x *executor) customResourcesBefore(ctx context.Context) (map[types.UID]bool, error) {
	existing, _, err := record.ListStackResources(ctx, x.clients.Dynamic)
	if err != nil {
		return nil, err
	}
	uids := map[types.UID]bool{}
	for _, o := range existing {
		uids[o.UID] = true
	}
	return uids, nil
}

// nodesBefore is the nodes' NFD and operator metadata before gpuctl's stack, what uninstall restores:
// read now when no install of gpuctl's is in place, else what the record already keeps.
func (x *executor) nodesBefore(ctx context.Context, prev *record.Record) (map[string]record.NodeMetadata, error) {
	if prev != nil && !prev.Uninstalled {
		return StackMetadataBefore(prev, nil), nil
	}
	nodes, err := x.clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return StackMetadataBefore(prev, nodes.Items), nil
}

// gpuctlVersion is the version of this binary as the record states it.
func gpuctlVersion(v string) string {
	if v != "" {
		return v
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// writeRecord writes the install record after a run that reached the executor, whether it ended well
// or not: uninstall must know what was created even when the waits failed.
func (x *executor) writeRecord(ctx context.Context, b *recordBefore, inputs record.Inputs, version, command string, runErr error) error {
	// An interrupted run still records what it did.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	r := &record.Record{
		GpuctlVersion: gpuctlVersion(version), Command: command, Updated: time.Now().UTC(), Result: runResult(runErr),
		Distribution: x.plan.Distribution, Profile: x.plan.Profile, Namespace: x.plan.Namespace,
		Inputs: inputs, NodeMetadataBefore: b.nodes,
	}
	if err := x.recordReleases(r, b); err != nil {
		return err
	}
	x.recordObjects(ctx, r, b)
	crs, err := x.recordCustomResources(ctx, b)
	if err != nil {
		return err
	}
	r.CustomResources, r.TracksCustomResources = crs, true
	if r.TaintedNodes, err = x.taintedNodes(ctx); err != nil {
		return err
	}
	mergePrevious(r, b.prev)
	return record.Write(ctx, x.clients.Kube, r)
}

// runResult is how the record states the run's end.
func runResult(runErr error) string {
	switch {
	case runErr == nil:
		return "succeeded"
	case errors.Is(runErr, context.Canceled):
		return "interrupted"
	default:
		return "failed"
	}
}

// recordReleases records the plan's releases that exist now (created: they did not before the run)
// and the operator version: the one its deployed release runs, else the one the plan releases.
func (x *executor) recordReleases(r *record.Record, b *recordBefore) error {
	for _, rel := range x.plan.RunningReleases() {
		if rel.Name == plan.OperatorRelease || rel.Name == plan.OperatorPackage {
			r.OperatorVersion = rel.AppVersion
		}
		if csv, _ := rel.Values["startingCSV"].(string); rel.Name == plan.OperatorPackage && strings.HasPrefix(csv, plan.OperatorPackage+".v") {
			// On OpenShift the release subscribes to the CSV of the operator release.
			r.OperatorVersion = strings.TrimPrefix(csv, plan.OperatorPackage+".")
		}
		ns := x.plan.ReleaseNamespace(rel)
		rc, err := x.releaseClient(ns)
		if err != nil {
			return err
		}
		if last, _ := rc.Last(rel.Name); last != nil {
			if rel.Name == plan.OperatorRelease && last.AppVersion != "" {
				r.OperatorVersion = last.AppVersion
			}
			a := x.plan.Adoption
			adopted := a != nil && a.Release == rel.Name && a.Namespace == ns
			r.Releases = append(r.Releases, record.Object{Name: rel.Name, Namespace: ns, Created: !b.releases[ns+"/"+rel.Name], Adopted: adopted})
		}
	}
	if r.OperatorVersion == "" {
		r.OperatorVersion = chartOperatorVersion(x.plan)
	}
	return nil
}

// chartOperatorVersion is the operator chart version the plan's steps name last ("" if none).
func chartOperatorVersion(p *plan.Plan) string {
	v := ""
	for _, s := range p.Steps {
		if cv := s.ChartReleases[plan.OperatorRelease]; cv != "" {
			v = cv
		}
	}
	return v
}

// recordObjects records the CRDs, namespaces and other objects of the plan that exist now, each
// created when it did not exist before the run, and each with its UID: uninstall --purge deletes the
// one gpuctl created, never another of the same name made after it.
func (x *executor) recordObjects(ctx context.Context, r *record.Record, b *recordBefore) {
	for name, existed := range b.crds {
		if crd, err := x.clients.Extensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{}); err == nil {
			r.CRDs = append(r.CRDs, record.Object{Name: name, UID: crd.UID, Created: !existed})
		}
	}
	for name, existed := range b.namespaces {
		if ns, err := x.clients.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); err == nil {
			r.Namespaces = append(r.Namespaces, record.Object{Name: name, UID: ns.UID, Created: !existed})
		}
	}
	for o, existed := range b.objects {
		if uid, err := record.UIDNow(ctx, x.clients, o); err == nil && uid != "" {
			o.UID, o.Created = uid, !existed
			r.Objects = append(r.Objects, o)
		}
	}
}

// taintedNodes names the nodes that carry a taint gpuctl added.
func (x *executor) taintedNodes(ctx context.Context) ([]string, error) {
	nodes, err := x.clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var tainted []string
	for i := range nodes.Items {
		if added, err := taint.Added(&nodes.Items[i]); err == nil && len(added) > 0 {
			tainted = append(tainted, nodes.Items[i].Name)
		}
	}
	return tainted, nil
}

// mergePrevious adds to r what the previous record prev (nil: none) names: an object created by
// either run stays created. The releases of an uninstalled install are gone: what runs now is all
// this run's.
func mergePrevious(r, prev *record.Record) {
	var before record.Record
	if prev != nil {
		before = *prev
		if prev.Uninstalled {
			before.Releases = nil
		}
	}
	r.Releases = record.MergeObjects(before.Releases, r.Releases)
	r.CRDs = record.MergeObjects(before.CRDs, r.CRDs)
	r.Namespaces = record.MergeObjects(before.Namespaces, r.Namespaces)
	r.Objects = record.MergeObjects(before.Objects, r.Objects)
}

// recordCustomResources are the stack's custom resources gpuctl created, by UID: the ones an earlier
// run recorded that still exist, and the ones this run made, which did not exist before it and are
// provably its own (an object of its releases, or applied by gpuctl: a ClusterPolicy someone else
// created meanwhile is neither).
func (x *executor) recordCustomResources(ctx context.Context, b *recordBefore) ([]record.Object, error) {
	now, objs, err := record.ListStackResources(ctx, x.clients.Dynamic)
	if err != nil {
		return nil, err
	}
	var rels []record.ReleaseRef
	for _, r := range x.plan.RunningReleases() {
		rels = append(rels, record.ReleaseRef{Name: r.Name, Namespace: x.plan.ReleaseNamespace(r)})
	}
	var prev map[types.UID]bool
	if b.prev != nil {
		prev = map[types.UID]bool{}
		for _, o := range b.prev.CustomResources {
			prev[o.UID] = true
		}
	}
	// A record of an older gpuctl has no UIDs: what existed before this run and is provably gpuctl's
	// is taken as its own, as uninstall would have.
	legacy := b.prev != nil && !b.prev.TracksCustomResources && !b.prev.Uninstalled
	var out []record.Object
	for i, o := range now {
		if prev[o.UID] || ((!b.customResources[o.UID] || legacy) && record.Provenance(&objs[i], rels) != "") {
			out = append(out, o)
		}
	}
	return out, nil
}
