package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	chart "helm.sh/helm/v4/pkg/chart/v2"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/lock"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
	"github.com/gpuctl/gpuctl/internal/step"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// writeLister lists the writes of a Plan's run by reading the cluster and asking it for server-side
// dry runs; it writes nothing.
type writeLister struct {
	clients  *kube.Clients
	plan     *plan.Plan
	w        *plan.Writes
	releases *release.Clients
}

// installWrites lists every write of p's run (plan.Writes), deciding each as the run decides it: the
// objects steps and CRDs by server-side dry runs of gpuctl's applies, each release by Helm's own
// install-or-upgrade rule against its stored revisions and the manifest Helm would apply, each node's
// taint from its taints now, and gpuctl's Lease and record.
func installWrites(ctx context.Context, clients *kube.Clients, p *plan.Plan) (*plan.Writes, error) {
	l := &writeLister{clients: clients, plan: p, releases: release.NewClients(clients.Getter), w: &plan.Writes{
		Objects: []plan.ObjectWrite{}, CRDs: []plan.CRDWrite{}, Releases: []plan.ReleaseWrite{}, Nodes: []plan.NodeChange{}}}
	for i := range p.Steps {
		s := &p.Steps[i]
		if s.Skip != "" {
			continue
		}
		var err error
		switch s.Kind {
		case plan.KindObjects:
			err = l.objects(ctx, s.ID, s.Objects)
		case plan.KindSecrets:
			err = l.secrets(ctx, s)
		case plan.KindCRDs:
			err = l.crds(ctx, s)
		case plan.KindRelease:
			err = l.release(ctx, s)
		case plan.KindPSP:
			err = l.psp(ctx, s)
		case plan.KindClusterPolicy:
			// Built at run time from the installed CSV's alm-examples: whether it changes is known then.
			l.w.Objects = append(l.w.Objects, plan.ObjectWrite{Step: s.ID, APIVersion: "nvidia.com/v1", Kind: "ClusterPolicy", Name: s.PolicyName, Action: plan.WriteApply})
		}
		if err != nil {
			return nil, fmt.Errorf("list the writes of step %s: %w", s.ID, err)
		}
	}
	nodes, err := clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	if ch := plan.TaintWrites(p, nodes.Items); ch != nil {
		l.w.Nodes = ch
	}
	if err := l.labels(ctx, nodes.Items); err != nil {
		return nil, err
	}
	l.w.NodeRule, l.w.Rules = plan.WriteRules(p)
	if l.w.Bookkeeping, err = bookkeepingWrites(ctx, clients.Kube); err != nil {
		return nil, err
	}
	l.w.Sort()
	return l.w, nil
}

// objects lists an objects step's applies: what gpuctl's server-side apply would do with each.
func (l *writeLister) objects(ctx context.Context, step string, objs []map[string]any) error {
	for _, o := range objs {
		u := &unstructured.Unstructured{Object: o}
		w := plan.ObjectWrite{Step: step, APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
		res, err := (&kube.Apply{Dynamic: l.clients.Dynamic, Mapper: l.clients.Mapper, Objects: []*unstructured.Unstructured{u}, DryRun: true}).Run(ctx)
		switch {
		case meta.IsNoMatchError(err):
			w.Action = plan.WriteApply // its kind is served only once an earlier step has run
		case err != nil:
			return err
		default:
			w.Action = objectAction(res[0].Action)
		}
		l.w.Objects = append(l.w.Objects, w)
	}
	return nil
}

func objectAction(a kube.ObjectAction) string {
	switch a {
	case kube.ObjectWouldCreate, kube.ObjectCreated:
		return plan.WriteCreate
	case kube.ObjectWouldUpdate, kube.ObjectUpdated:
		return plan.WriteUpdate
	default:
		return plan.WriteUnchanged
	}
}

// secrets lists the Secrets of a secrets step: created, or applied over the one there (their contents
// are read only by the run).
func (l *writeLister) secrets(ctx context.Context, s *plan.Step) error {
	for _, sec := range s.Secrets {
		w := plan.ObjectWrite{Step: s.ID, APIVersion: "v1", Kind: "Secret", Namespace: sec.Namespace, Name: sec.Name, Action: plan.WriteCreate}
		_, err := l.clients.Kube.CoreV1().Secrets(sec.Namespace).Get(ctx, sec.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			w.Action = plan.WriteApply
		case !apierrors.IsNotFound(err):
			return err
		}
		l.w.Objects = append(l.w.Objects, w)
	}
	return nil
}

// crds lists the CRDs step's applies, decided as the run decides them (kube.ApplyCRDs as a dry run).
func (l *writeLister) crds(ctx context.Context, s *plan.Step) error {
	for _, name := range s.Charts {
		crds, version, err := render.ChartCRDs(name, s.ChartReleases[name])
		if err != nil {
			return err
		}
		var known map[string][]*apiextensionsv1.CustomResourceDefinition
		if name == plan.OperatorRelease {
			if known, err = render.OperatorReleaseCRDs(); err != nil {
				return err
			}
		}
		res, err := (&kube.ApplyCRDs{Client: l.clients.Extensions, Dynamic: l.clients.Dynamic, CRDs: crds, Version: version, Releases: known, DryRun: true}).Run(ctx)
		if err != nil {
			return err
		}
		for _, r := range res {
			w := plan.CRDWrite{Step: s.ID, Name: r.Name, Action: plan.WriteUnchanged, Reason: r.Reason}
			switch r.Action {
			case kube.CRDWouldCreate:
				w.Action = plan.WriteCreate
			case kube.CRDWouldUpdate:
				w.Action = plan.WriteUpdate
			case kube.CRDKept:
				w.Action = plan.WriteKeep
			}
			l.w.CRDs = append(l.w.CRDs, w)
		}
	}
	return nil
}

// release lists a release step's operation and the objects Helm would apply and delete.
func (l *writeLister) release(ctx context.Context, s *plan.Step) error {
	r := s.Release
	ns := l.plan.ReleaseNamespace(r)
	ch, err := render.LoadChart(r.Chart, r.AppVersion)
	if err != nil {
		return err
	}
	values := r.Values
	if r.Chart == plan.OLMChart {
		// The Subscription's channel and CSV as the run resolves them from the catalog.
		if values, err = step.OLMValues(ctx, l.clients, values); err != nil {
			return err
		}
	}
	rc, err := l.releases.In(ns)
	if err != nil {
		return err
	}
	pv, err := rc.PreviewApply(ctx, r.Name, ch, values)
	if err != nil {
		return err
	}
	op := plan.ReleaseUnchanged
	switch pv.Outcome {
	case release.WouldInstall:
		op = plan.ReleaseInstall
	case release.WouldUpgrade:
		op = plan.ReleaseUpgrade
	}
	l.w.Releases = append(l.w.Releases, plan.ReleaseWrite{Step: s.ID, Name: r.Name, Namespace: ns, Chart: r.Chart, ChartVersion: r.ChartVersion,
		Operation: op, Revision: pv.Revision, FromRevision: pv.From, Recreate: pv.Missing})
	if op == plan.ReleaseUnchanged {
		return nil
	}
	scope := newScopes(l.clients.Mapper, ch)
	rendered, err := l.manifestObjects(pv.Manifest, ns, scope)
	if err != nil {
		return fmt.Errorf("release %s: %w", r.Name, err)
	}
	deployed, err := l.manifestObjects(pv.Deployed, ns, scope)
	if err != nil {
		return fmt.Errorf("release %s, deployed: %w", r.Name, err)
	}
	writes, gone := plan.ReleaseObjects(s.ID, op, rendered, deployed, pv.Missing)
	l.w.Objects = append(l.w.Objects, writes...)
	for _, o := range gone {
		uid, err := currentUID(ctx, l.clients.Dynamic, l.clients.Mapper, o)
		if err != nil {
			return err
		}
		if uid != "" {
			l.w.Deletes = append(l.w.Deletes, plan.ObjectDelete{Step: s.ID, APIVersion: o.GetAPIVersion(), Kind: o.GetKind(),
				Namespace: o.GetNamespace(), Name: o.GetName(), UID: types.UID(uid)})
		}
	}
	return nil
}

// manifestObjects decodes a release manifest, giving each namespaced object without a namespace the
// release's, as Helm does when it applies them.
func (l *writeLister) manifestObjects(manifest, ns string, scope *scopes) ([]*unstructured.Unstructured, error) {
	objs, err := render.DecodeManifest(manifest)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetNamespace() == "" && scope.namespaced(o.GroupVersionKind()) {
			o.SetNamespace(ns)
		}
	}
	return objs, nil
}

// scopes tells whether a kind is namespaced: from the API server, or, for a kind whose CRD is not
// served yet, from the CRDs the chart carries.
type scopes struct {
	mapper meta.RESTMapper
	crds   map[schema.GroupKind]bool
}

func newScopes(mapper meta.RESTMapper, ch *chart.Chart) *scopes {
	sc := &scopes{mapper: mapper, crds: map[schema.GroupKind]bool{}}
	for _, f := range ch.CRDObjects() {
		objs, err := render.DecodeManifest(string(f.File.Data))
		if err != nil {
			continue // the run's CRD step reads them too and says what is wrong
		}
		for _, o := range objs {
			group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
			sc.crds[schema.GroupKind{Group: group, Kind: kind}] = scope == string(apiextensionsv1.NamespaceScoped)
		}
	}
	return sc
}

func (sc *scopes) namespaced(gvk schema.GroupVersionKind) bool {
	if m, err := sc.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		return m.Scope.Name() == meta.RESTScopeNameNamespace
	}
	if ns, ok := sc.crds[gvk.GroupKind()]; ok {
		return ns
	}
	return true // Helm gives an unknown kind the release's namespace
}

// currentUID is the UID of the object named like o, "" when there is none (or its kind is not served).
func currentUID(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) (string, error) {
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	have, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(have.GetUID()), nil
}

// psp lists the PodSecurityPolicy RoleBinding where the cluster serves PodSecurityPolicy (the step
// applies it only there).
func (l *writeLister) psp(ctx context.Context, s *plan.Step) error {
	served, err := step.PSPServed(l.clients)
	if err != nil || !served {
		return err
	}
	binding := map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": plan.PSPBindingName, "namespace": s.Target}}
	return l.objects(ctx, s.ID, []map[string]any{binding})
}

// bookkeepingWrites are gpuctl's own writes: the install Lease (internal/lock) and the install record
// (internal/record), each created or updated.
func bookkeepingWrites(ctx context.Context, kc kubernetes.Interface) ([]plan.ObjectWrite, error) {
	lease := plan.ObjectWrite{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: lock.DefaultNamespace, Name: lock.DefaultName, Action: plan.WriteCreate}
	if _, err := kc.CoordinationV1().Leases(lock.DefaultNamespace).Get(ctx, lock.DefaultName, metav1.GetOptions{}); err == nil {
		lease.Action = plan.WriteUpdate
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read Lease %s/%s: %w", lock.DefaultNamespace, lock.DefaultName, err)
	}
	rec := plan.ObjectWrite{APIVersion: "v1", Kind: "ConfigMap", Namespace: record.Namespace, Name: record.Name, Action: plan.WriteCreate}
	if _, err := kc.CoreV1().ConfigMaps(record.Namespace).Get(ctx, record.Name, metav1.GetOptions{}); err == nil {
		rec.Action = plan.WriteUpdate
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read the install record: %w", err)
	}
	return []plan.ObjectWrite{lease, rec}, nil
}

// gpuctlTainted are the nodes with a taint gpuctl recorded as its own (taint.Added).
func gpuctlTainted(ctx context.Context, kc kubernetes.Interface) (map[string]bool, error) {
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	out := map[string]bool{}
	for i := range nodes.Items {
		if added, err := taint.Added(&nodes.Items[i]); err == nil && len(added) > 0 {
			out[nodes.Items[i].Name] = true
		}
	}
	return out, nil
}

// taintedUnlisted names the nodes the run tainted that the plan's taint step did not name (GPU nodes
// NFD labelled during the run, tainted by the plan's rule, plan.NodeRuleText), and warns of each: a
// dry run could not list them.
func taintedUnlisted(ctx context.Context, kc kubernetes.Interface, p *plan.Plan, before map[string]bool, sink event.Sink) []string {
	s := p.Step("taint")
	if s == nil || s.Taint == nil || s.Skip != "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	now, err := gpuctlTainted(ctx, kc)
	if err != nil {
		sink.Event(event.Event{Time: time.Now(), Type: event.Warning, Message: "could not read back which nodes were tainted: " + err.Error()})
		return nil
	}
	var out []string
	for n := range now {
		if !before[n] && !slices.Contains(s.Taint.Nodes, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out) // map keys: unique already
	for _, n := range out {
		sink.Event(event.Event{Time: time.Now(), Type: event.Warning,
			Message: "tainted node " + n + ", which the plan did not name: NFD labelled it a GPU node during the run (the plan's rule for such nodes; --dry-run says it as nodeRule)"})
	}
	return out
}

// labels lists the node labels of the plan's node-labels steps (--sharing, --mig), decided as their
// run decides them (step.LabelWrites) against the nodes now and the install record's labels from
// before gpuctl's first install.
func (l *writeLister) labels(ctx context.Context, nodes []corev1.Node) error {
	var steps []*plan.Step
	for i := range l.plan.Steps {
		if s := &l.plan.Steps[i]; s.Kind == plan.KindNodeLabels && s.Skip == "" {
			steps = append(steps, s)
		}
	}
	if len(steps) == 0 {
		return nil
	}
	prev, err := record.Read(ctx, l.clients.Kube)
	if err != nil {
		return err
	}
	before := step.StackMetadataBefore(prev, nodes)
	for _, s := range steps {
		l.w.Labels = append(l.w.Labels, step.LabelWrites(nodes, s, before)...)
	}
	return nil
}
