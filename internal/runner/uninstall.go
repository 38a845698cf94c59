package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// FinalizerError names an object a finalizer keeps from going away.
type FinalizerError struct {
	Object     string
	Finalizers []string
	Waited     time.Duration
}

func (e *FinalizerError) Error() string {
	return fmt.Sprintf("%s is still there after %s: finalizer %s holds it", e.Object, e.Waited.Round(time.Second), strings.Join(e.Finalizers, ", "))
}

// Custom resources of the operator (NVIDIA/gpu-operator api/nvidia/v1 and v1alpha1@v26.7.0) and NFD.
var (
	nodeFeaturesGVR = schema.GroupVersionResource{Group: "nfd.k8s-sigs.io", Version: "v1alpha1", Resource: "nodefeatures"}
	nfdInstancesGVR = schema.GroupVersionResource{Group: "nfd.openshift.io", Version: "v1", Resource: "nodefeaturediscoveries"}
)

func finalizerHint(fe *FinalizerError) string {
	kind, name, _ := strings.Cut(fe.Object, " ")
	kind = strings.ToLower(kind)
	ns := ""
	if n, rest, ok := strings.Cut(name, "/"); ok {
		ns, name = " -n "+n, rest
	}
	return fmt.Sprintf("the controller that set %s must remove it; if that controller is gone for good, remove the finalizer yourself "+
		"(kubectl patch %s %s%s --type=json -p '[{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}]') and run gpuctl uninstall again",
		strings.Join(fe.Finalizers, ", "), kind, name, ns)
}

// Uninstaller plans an uninstall and carries the plan out, step by step.
type Uninstaller struct {
	Clients *kube.Clients
	// Record is the install record (nil: an install by a gpuctl that wrote none).
	Record *record.Record
	// Purge also deletes the CRDs and namespaces gpuctl created; Force lets it delete CRDs with
	// custom resources gpuctl did not create.
	Purge, Force bool
	// FinalizerWait is how long a deleted object may stay before the step names what holds it.
	FinalizerWait time.Duration
	Sink          event.Sink
	releases      map[string]*release.Client
	// rels are the releases to remove, p the plan.
	rels []uninstallRelease
	p    *UninstallPlan
	// deleted are the UIDs of the ClusterPolicy and NVIDIADriver objects deleted: their dependents
	// must be gone before uninstall says it is done.
	deleted []types.UID
}

func (u *Uninstaller) releaseClient(ns string) (*release.Client, error) {
	if u.releases == nil {
		u.releases = map[string]*release.Client{}
	}
	if rc, ok := u.releases[ns]; ok {
		return rc, nil
	}
	rc, err := release.New(u.Clients.Getter, ns, nil)
	if err != nil {
		return nil, err
	}
	u.releases[ns] = rc
	return rc, nil
}

// uninstallRelease is a release uninstall removes, in that order.
type uninstallRelease struct {
	name, namespace string
}

// releaseOrder is the order releases are uninstalled in: the reverse of install.
func releaseOrder(name string) int {
	switch {
	case name == plan.MonitoringRelease:
		// Installed after the operator, so it goes first; its dashboard and alerts mean nothing without it.
		return -1
	case name == plan.OperatorRelease || name == plan.OperatorPackage:
		return 0
	case strings.HasPrefix(name, plan.GKEDriverInstaller):
		return 1
	default: // node-feature-discovery, nfd-operator
		return 2
	}
}

// targets are the releases to remove: the recorded ones, or (no record: an install by an older gpuctl)
// gpuctl's release names in the namespace that exist.
func (u *Uninstaller) targets() ([]uninstallRelease, error) {
	var out []uninstallRelease
	if u.Record != nil {
		for _, r := range u.Record.Releases {
			out = append(out, uninstallRelease{r.Name, r.Namespace})
		}
	} else {
		for _, name := range []string{plan.MonitoringRelease, plan.OperatorRelease, plan.GKEDriverInstaller + "-cos", plan.GKEDriverInstaller + "-ubuntu", plan.NFDRelease} {
			out = append(out, uninstallRelease{name, u.Clients.Namespace})
		}
	}
	var present []uninstallRelease
	for _, r := range out {
		rc, err := u.releaseClient(r.namespace)
		if err != nil {
			return nil, err
		}
		last, err := rc.Last(r.name)
		if err != nil {
			return nil, err
		}
		if last != nil {
			present = append(present, r)
		}
	}
	slices.SortStableFunc(present, func(a, b uninstallRelease) int { return releaseOrder(a.name) - releaseOrder(b.name) })
	return present, nil
}

func (u *Uninstaller) namespace() string {
	if u.Record != nil && u.Record.Namespace != "" {
		return u.Record.Namespace
	}
	return u.Clients.Namespace
}

// ours reports whether gpuctl installed the release (so the labels of its stack are gpuctl's to remove).
func (u *Uninstaller) ours(names ...string) bool {
	if u.Record == nil {
		return true
	}
	for _, n := range names {
		if u.Record.Release(n) != nil {
			return true
		}
	}
	return false
}

// steps are the plan's parts as the runner carries them out, in the reverse order of install.
func (u *Uninstaller) steps() []Step {
	steps := []Step{{ID: stepDeleteCustomResources, Title: "Delete the ClusterPolicy and NVIDIADriver objects gpuctl created",
		Do: messages(func(ctx context.Context, progress func(string)) (Outcome, error) {
			return u.deletePlanned(ctx, stepDeleteCustomResources, progress)
		}),
		Hint: "kubectl get clusterpolicy,nvidiadriver shows them"}}
	waitDependents := Step{ID: "wait-operands", Title: "Wait until the objects they owned are gone", Do: messages(u.waitDependents),
		Hint: "kubectl -n " + u.namespace() + " get daemonsets,pods,serviceaccounts; kubectl get clusterroles,clusterrolebindings show what is left"}
	if !slices.ContainsFunc(u.rels, func(r uninstallRelease) bool { return releaseOrder(r.name) == 0 }) {
		steps = append(steps, waitDependents)
	}
	for _, r := range u.rels {
		steps = append(steps, u.releaseSteps(r)...)
		if releaseOrder(r.name) == 0 {
			// After the operator has stopped: an object its last reconcile created while the
			// ClusterPolicy went is owned by it too, and goes only now.
			steps = append(steps, waitDependents)
		}
	}
	steps = append(steps,
		Step{ID: "untaint", Title: "Remove the taints gpuctl added", Do: messages(u.untaint)},
		Step{ID: "node-labels", Title: "Remove the node labels NFD and the operator wrote", Do: messages(u.nodeMetadata)})
	if u.Purge {
		steps = append(steps,
			Step{ID: "purge-objects", Title: "Delete the other objects gpuctl created", Do: messages(u.purgeObjects)},
			Step{ID: "purge-crds", Title: "Delete the CRDs gpuctl created", Do: messages(u.purgeCRDs)},
			Step{ID: "purge-namespaces", Title: "Delete the namespaces gpuctl created", Do: messages(u.purgeNamespaces)})
	}
	return append(steps, Step{ID: "record", Title: "Install record " + record.Namespace + "/" + record.Name, Do: messages(u.updateRecord)})
}

// releaseSteps remove release r (and, for OpenShift's NFD operator, the instance gpuctl created first).
func (u *Uninstaller) releaseSteps(r uninstallRelease) []Step {
	var steps []Step
	if r.name == "nfd-operator" {
		steps = append(steps, Step{ID: stepDeleteNFDInstance, Title: "Delete the NodeFeatureDiscovery instance gpuctl created",
			Do: messages(func(ctx context.Context, progress func(string)) (Outcome, error) {
				return u.deletePlanned(ctx, stepDeleteNFDInstance, progress)
			})})
	}
	return append(steps, Step{ID: releaseStep(r.name), Title: "Uninstall release " + r.name,
		Do: messages(func(ctx context.Context, progress func(string)) (Outcome, error) {
			return u.uninstallRelease(ctx, r, progress)
		}),
		Hint: "helm history " + r.name + " -n " + r.namespace + " shows the release's revisions"})
}

// messages adapts a handler that reports its progress as plain messages.
func messages(do func(context.Context, func(string)) (Outcome, error)) func(context.Context, func(health.Progress)) (Outcome, error) {
	return func(ctx context.Context, progress func(health.Progress)) (Outcome, error) {
		return do(ctx, func(m string) { progress(health.Progress{Message: m}) })
	}
}

// UninstallResume is what an interrupted uninstall tells the user to do.
const UninstallResume = "run gpuctl uninstall again: it continues where it stopped"

// Run carries out plan p (made by Plan) step by step.
func (u *Uninstaller) Run(ctx context.Context, p *UninstallPlan) (*Runner, error) {
	u.p = p
	r := &Runner{Sink: u.Sink, Resume: UninstallResume}
	return r, r.Run(ctx, u.steps())
}

// deletePlanned deletes the plan's objects of one step, each only while it has the planned UID,
// in the foreground: the API server removes an object deleted so only once the garbage collector
// has removed every dependent that blocks its owner's deletion, and NVIDIA's operator makes all its
// operands so (controllerutil.SetControllerReference sets blockOwnerDeletion; NVIDIA/gpu-operator
// controllers/object_controls.go and internal/state at v26.7.0). So when the object is gone, its
// DaemonSets, pods, service accounts and RBAC are gone too.
func (u *Uninstaller) deletePlanned(ctx context.Context, step string, progress func(string)) (Outcome, error) {
	planned := u.p.deletions(step)
	var kept []string
	if step == stepDeleteCustomResources || step == stepDeleteNFDInstance {
		for _, k := range u.p.Kept {
			if (k.Kind == "NodeFeatureDiscovery") == (step == stepDeleteNFDInstance) {
				kept = append(kept, "kept "+k.String())
			}
		}
	}
	deleted, err := u.deleteObjects(ctx, planned, progress)
	if err != nil {
		return Outcome{}, err
	}
	if len(deleted) == 0 {
		return Outcome{Skipped: true, Message: strings.Join(append([]string{"none of gpuctl's found"}, kept...), "; ")}, nil
	}
	return Outcome{Changed: true, Message: strings.Join(append([]string{"deleted " + strings.Join(deleted, ", ")}, kept...), "; ")}, nil
}

// deleteObjects deletes planned objects (foreground, with their UID as precondition) and waits until
// they are gone; it returns the ones it deleted.
func (u *Uninstaller) deleteObjects(ctx context.Context, planned []PlannedDeletion, progress func(string)) ([]string, error) {
	type target struct {
		ri dynamic.ResourceInterface
		d  PlannedDeletion
	}
	var targets []target
	for _, d := range planned {
		gv, err := schema.ParseGroupVersion(d.APIVersion)
		if err != nil {
			return nil, err
		}
		gvr := gv.WithResource(resourceOf(d.Kind))
		var ri dynamic.ResourceInterface = u.Clients.Dynamic.Resource(gvr)
		if d.Namespace != "" {
			ri = u.Clients.Dynamic.Resource(gvr).Namespace(d.Namespace)
		}
		uid := d.UID
		err = ri.Delete(ctx, d.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground),
			Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case apierrors.IsConflict(err):
			// Someone else's object of that name now: it is theirs.
			progress(d.String() + " was re-created by someone else: kept")
			continue
		case err != nil:
			return nil, fmt.Errorf("delete %s: %w", d, err)
		}
		targets = append(targets, target{ri, d})
		if d.Kind == "ClusterPolicy" || d.Kind == "NVIDIADriver" {
			u.deleted = append(u.deleted, d.UID)
		}
	}
	var deleted []string
	for _, t := range targets {
		progress("waiting for " + t.d.String() + " and what it owns to go")
		if err := u.waitGone(ctx, t.ri, t.d.Kind, t.d.Name, t.d.UID); err != nil {
			return nil, err
		}
		deleted = append(deleted, t.d.String())
	}
	return deleted, nil
}

// resourceOf is the resource name of the kinds uninstall plans deletions of.
func resourceOf(kind string) string {
	for _, r := range stackResources() {
		if r.kind == kind {
			return r.gvr.Resource
		}
	}
	if kind == "NodeFeature" {
		return nodeFeaturesGVR.Resource
	}
	return strings.ToLower(kind) + "s"
}

// waitGone waits up to FinalizerWait for an object to be gone (or replaced: another UID), then names
// what holds it: its finalizers, or, for a foreground deletion, the dependents still there.
func (u *Uninstaller) waitGone(ctx context.Context, ri dynamic.ResourceInterface, kind, name string, uid types.UID) error {
	var last *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(ctx, time.Second, u.FinalizerWait, true, func(ctx context.Context) (bool, error) {
		obj, err := ri.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if uid != "" && obj.GetUID() != uid {
			return true, nil
		}
		last = obj
		return false, nil
	})
	if err == nil {
		return nil
	}
	if ctx.Err() == nil && last != nil {
		obj := describe(kind, last.GetNamespace(), name)
		fs := slices.DeleteFunc(slices.Clone(last.GetFinalizers()), func(f string) bool { return f == metav1.FinalizerDeleteDependents })
		if len(fs) > 0 {
			return &FinalizerError{Object: obj, Finalizers: fs, Waited: u.FinalizerWait}
		}
		if len(fs) < len(last.GetFinalizers()) {
			left, lerr := u.dependents(ctx, []types.UID{last.GetUID()})
			if lerr == nil && len(left) > 0 {
				return fmt.Errorf("%s is still there after %s: the garbage collector has not yet removed what it owns: %s", obj, u.FinalizerWait, strings.Join(left, ", "))
			}
		}
		return fmt.Errorf("%s is still there after %s (deleting since %v)", obj, u.FinalizerWait, last.GetDeletionTimestamp())
	}
	return err
}

// dependentResources are the kinds NVIDIA's operator creates for its operands (NVIDIA/gpu-operator
// assets/ and manifests/ at v26.7.0), and the pods of its DaemonSets: namespaced ones in the operator's
// namespace. A kind the cluster does not serve (SecurityContextConstraints off OpenShift, the
// Prometheus Operator's) has none.
func dependentResources() (namespaced, cluster []schema.GroupVersionResource) {
	v1 := func(group, resource string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: group, Version: "v1", Resource: resource}
	}
	namespaced = []schema.GroupVersionResource{v1("apps", "daemonsets"), v1("apps", "deployments"), v1("", "pods"), v1("", "serviceaccounts"),
		v1("", "configmaps"), v1("", "services"), v1("rbac.authorization.k8s.io", "roles"), v1("rbac.authorization.k8s.io", "rolebindings"),
		v1("monitoring.coreos.com", "servicemonitors"), v1("monitoring.coreos.com", "prometheusrules")}
	cluster = []schema.GroupVersionResource{v1("rbac.authorization.k8s.io", "clusterroles"), v1("rbac.authorization.k8s.io", "clusterrolebindings"),
		v1("node.k8s.io", "runtimeclasses"), v1("security.openshift.io", "securitycontextconstraints")}
	return namespaced, cluster
}

// dependents names the objects of dependentResources that an owner in uids owns, directly or
// through a DaemonSet (its pods).
func (u *Uninstaller) dependents(ctx context.Context, uids []types.UID) ([]string, error) {
	owners := map[types.UID]bool{}
	for _, id := range uids {
		owners[id] = true
	}
	namespaced, cluster := dependentResources()
	var out []string
	scan := func(gvr schema.GroupVersionResource, ri dynamic.ResourceInterface) error {
		list, err := ri.List(ctx, metav1.ListOptions{})
		if kube.Absent(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", gvr.Resource, err)
		}
		for _, o := range list.Items {
			if slices.ContainsFunc(o.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return owners[r.UID] }) {
				out = append(out, describe(o.GetKind(), o.GetNamespace(), o.GetName()))
				if gvr.Resource == "daemonsets" {
					owners[o.GetUID()] = true // its pods, listed after it
				}
			}
		}
		return nil
	}
	for _, gvr := range namespaced {
		if err := scan(gvr, u.Clients.Dynamic.Resource(gvr).Namespace(u.namespace())); err != nil {
			return nil, err
		}
	}
	for _, gvr := range cluster {
		if err := scan(gvr, u.Clients.Dynamic.Resource(gvr)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// waitDependents waits until nothing the deleted ClusterPolicy and NVIDIADriver objects owned is
// left. Their foreground deletion already waited for what existed then; this also covers what the
// operator's last reconcile created while they went, which the garbage collector removes once it
// sees the owner gone (https://kubernetes.io/docs/concepts/architecture/garbage-collection/).
func (u *Uninstaller) waitDependents(ctx context.Context, progress func(string)) (Outcome, error) {
	if len(u.deleted) == 0 {
		return Outcome{Skipped: true, Message: "gpuctl deleted no ClusterPolicy or NVIDIADriver"}, nil
	}
	var left []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, u.FinalizerWait, true, func(ctx context.Context) (bool, error) {
		l, err := u.dependents(ctx, u.deleted)
		if err != nil {
			return false, err
		}
		left = l
		if len(l) > 0 {
			progress(fmt.Sprintf("%d objects left", len(l)))
		}
		return len(l) == 0, nil
	})
	if err != nil && ctx.Err() == nil && len(left) > 0 {
		return Outcome{}, fmt.Errorf("still there after %s: %s", u.FinalizerWait, strings.Join(left, ", "))
	}
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Message: "none left"}, nil
}

// uninstallRelease uninstalls a release; on OpenShift (an olm-operator release: a Subscription) it
// also deletes the ClusterServiceVersion the Subscription installed, which OLM keeps otherwise
// (https://docs.openshift.com/container-platform/latest/operators/admin/olm-deleting-operators-from-cluster.html).
func (u *Uninstaller) uninstallRelease(ctx context.Context, r uninstallRelease, progress func(string)) (Outcome, error) {
	rc, err := u.releaseClient(r.namespace)
	if err != nil {
		return Outcome{}, err
	}
	last, err := rc.Last(r.name)
	if err != nil {
		return Outcome{}, err
	}
	if last == nil {
		return Outcome{Skipped: true, Message: "not installed"}, nil
	}
	var csvs []string
	if last.Chart == plan.OLMChart {
		subs, err := u.Clients.Dynamic.Resource(subscriptionsGVR).Namespace(r.namespace).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, s := range subs.Items {
				if csv, _, _ := unstructured.NestedString(s.Object, "status", "installedCSV"); csv != "" {
					csvs = append(csvs, csv)
				}
			}
		}
	}
	if err := rc.Uninstall(ctx, r.name); err != nil {
		return Outcome{}, fmt.Errorf("uninstall release %s: %w", r.name, err)
	}
	msg := fmt.Sprintf("uninstalled %s revision %d (%s %s)", r.name, last.Revision, last.Chart, last.ChartVersion)
	for _, csv := range csvs {
		ri := u.Clients.Dynamic.Resource(csvsGVR).Namespace(r.namespace)
		// OLM's owner references do not block the CSV's deletion (they are non-blocking), so the
		// garbage collector removes the operator's Deployment some time after the CSV is gone: wait
		// for the Deployments the CSV owned too, so the operator is really gone when this step ends.
		var owned []string
		if obj, err := ri.Get(ctx, csv, metav1.GetOptions{}); err == nil {
			deps, err := u.Clients.Kube.AppsV1().Deployments(r.namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return Outcome{}, fmt.Errorf("list the Deployments of ClusterServiceVersion %s: %w", csv, err)
			}
			for _, d := range deps.Items {
				for _, ref := range d.OwnerReferences {
					if ref.UID == obj.GetUID() {
						owned = append(owned, d.Name)
					}
				}
			}
		}
		if err := ri.Delete(ctx, csv, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return Outcome{}, fmt.Errorf("delete ClusterServiceVersion %s: %w", csv, err)
		}
		if err := u.waitGone(ctx, ri, "ClusterServiceVersion", csv, ""); err != nil {
			return Outcome{}, err
		}
		deployments := u.Clients.Dynamic.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace(r.namespace)
		for _, d := range owned {
			if err := u.waitGone(ctx, deployments, "Deployment", d, ""); err != nil {
				return Outcome{}, err
			}
		}
		msg += ", deleted ClusterServiceVersion " + csv
	}
	// NFD's workers leave a NodeFeature object per node in the release's namespace: the plan names them.
	if _, err := u.deleteObjects(ctx, u.p.deletions(releaseStep(r.name)), progress); err != nil {
		return Outcome{}, fmt.Errorf("delete NodeFeature objects: %w", err)
	}
	return Outcome{Changed: true, Message: msg}, nil
}

func (u *Uninstaller) untaint(ctx context.Context, _ func(string)) (Outcome, error) {
	res, err := (&taint.Untaint{Client: u.Clients.Kube}).Run(ctx, nil)
	if err != nil {
		return Outcome{}, err
	}
	n := res.Changed()
	if n == 0 {
		return Outcome{Skipped: true, Message: "no node carries a taint gpuctl added"}, nil
	}
	return Outcome{Changed: true, Message: fmt.Sprintf("%d nodes untainted", n)}, nil
}

// nodeMetadata carries out the plan's rule for node labels and annotations on every node as it is
// now. The plan lists the keys as they were when it was made, but the operator writes labels until
// its release is gone (a node's driver upgrade state, a node that joined meanwhile), so the same
// judgement (planNodeMetadata: who wrote each key) is made again here, after the operator stopped.
func (u *Uninstaller) nodeMetadata(ctx context.Context, _ func(string)) (Outcome, error) {
	nfd := u.ours(plan.NFDRelease, "nfd-operator")
	operator := u.ours(plan.OperatorRelease, plan.OperatorPackage)
	if !nfd && !operator {
		return Outcome{Skipped: true, Message: "gpuctl installed neither NFD nor the operator"}, nil
	}
	var before map[string]record.NodeMetadata
	if u.Record != nil {
		before = u.Record.NodeMetadataBefore
	}
	nodes, err := u.Clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return Outcome{}, fmt.Errorf("list nodes: %w", err)
	}
	changed, kept := 0, 0
	for i := range nodes.Items {
		n := &nodes.Items[i]
		np := planNodeMetadata(n, before[n.Name], nfd, operator)
		kept += len(np.Kept)
		patch := np.patch(n)
		if patch == nil {
			continue
		}
		data, err := json.Marshal(patch)
		if err != nil {
			return Outcome{}, err
		}
		if _, err := u.Clients.Kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, data, metav1.PatchOptions{FieldManager: kube.FieldManager}); err != nil {
			return Outcome{}, fmt.Errorf("node %s: %w", n.Name, err)
		}
		changed++
	}
	msg := fmt.Sprintf("%d nodes back to their labels before the install", changed)
	if changed == 0 {
		msg = "no labels to remove"
	}
	if kept > 0 {
		msg += fmt.Sprintf("; kept %d labels and annotations in the stack's prefixes that others wrote", kept)
	}
	return Outcome{Changed: changed > 0, Skipped: changed == 0, Message: msg}, nil
}

func (u *Uninstaller) purgeCRDs(ctx context.Context, progress func(string)) (Outcome, error) {
	if u.Record == nil {
		return Outcome{Skipped: true, Message: "no install record: gpuctl cannot tell the CRDs it created from ones it found"}, nil
	}
	crds := u.Clients.Extensions.ApiextensionsV1().CustomResourceDefinitions()
	var deleted []string
	var names []string
	if u.p.Purge != nil {
		names = u.p.Purge.CRDs
	}
	for _, name := range names {
		err := crds.Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("delete CRD %s: %w", name, err)
		}
		deleted = append(deleted, name)
	}
	ri := u.Clients.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, name := range deleted {
		progress("waiting for CRD " + name + " to go")
		if err := u.waitGone(ctx, ri, "CustomResourceDefinition", name, ""); err != nil {
			return Outcome{}, err
		}
	}
	if len(deleted) == 0 {
		return Outcome{Skipped: true, Message: "none left"}, nil
	}
	u.Clients.Refresh()
	return Outcome{Changed: true, Message: fmt.Sprintf("deleted %d: %s", len(deleted), strings.Join(deleted, ", "))}, nil
}

// purgeObjects deletes the objects gpuctl created outside its releases (the NVAIE Secrets, profile
// prerequisites, the PSP RoleBinding): in a namespace gpuctl found, deleting the namespace would not.
func (u *Uninstaller) purgeObjects(ctx context.Context, progress func(string)) (Outcome, error) {
	if u.Record == nil {
		return Outcome{Skipped: true, Message: "no install record: gpuctl cannot tell the objects it created from ones it found"}, nil
	}
	type gone struct {
		ri   dynamic.ResourceInterface
		o    record.Object
		desc string
	}
	var deleted []gone
	for _, o := range u.Record.Objects {
		if !o.Created {
			continue
		}
		ri, err := recordedResource(u.Clients, o)
		if kube.Absent(err) {
			continue // its kind is no longer served: nothing of it is left
		}
		if err != nil {
			return Outcome{}, err
		}
		desc := o.Kind + " " + o.Name
		if o.Namespace != "" {
			desc = o.Kind + " " + o.Namespace + "/" + o.Name
		}
		err = ri.Delete(ctx, o.Name, metav1.DeleteOptions{})
		if kube.Absent(err) {
			continue
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("delete %s: %w", desc, err)
		}
		deleted = append(deleted, gone{ri, o, desc})
	}
	var names []string
	for _, d := range deleted {
		progress("waiting for " + d.desc + " to go")
		if err := u.waitGone(ctx, d.ri, d.o.Kind, d.o.Name, ""); err != nil {
			return Outcome{}, err
		}
		names = append(names, d.desc)
	}
	if len(names) == 0 {
		return Outcome{Skipped: true, Message: "none left"}, nil
	}
	return Outcome{Changed: true, Message: "deleted " + strings.Join(names, ", ")}, nil
}

func (u *Uninstaller) purgeNamespaces(ctx context.Context, progress func(string)) (Outcome, error) {
	if u.Record == nil {
		return Outcome{Skipped: true, Message: "no install record: gpuctl cannot tell the namespaces it created from ones it found"}, nil
	}
	nss := u.Clients.Kube.CoreV1().Namespaces()
	var deleted []string
	for _, name := range record.CreatedNames(u.Record.Namespaces) {
		err := nss.Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("delete namespace %s: %w", name, err)
		}
		deleted = append(deleted, name)
	}
	ri := u.Clients.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	for _, name := range deleted {
		progress("waiting for namespace " + name + " to go")
		if err := u.waitGone(ctx, ri, "Namespace", name, ""); err != nil {
			return Outcome{}, err
		}
	}
	// A namespace gpuctl found stays, without the labels gpuctl applied to it (Pod Security Admission's
	// privileged levels): applying the bare namespace as gpuctl's field manager releases the fields only
	// gpuctl owns, and the API server removes them; a label someone else also set stays
	// (https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management).
	var released []string
	for _, o := range u.Record.Namespaces {
		if o.Created {
			continue
		}
		ns, err := nss.Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("read namespace %s: %w", o.Name, err)
		}
		if !slices.ContainsFunc(ns.ManagedFields, func(m metav1.ManagedFieldsEntry) bool {
			return m.Manager == kube.FieldManager && m.Operation == metav1.ManagedFieldsOperationApply
		}) {
			continue
		}
		bare := []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":` + strconv.Quote(o.Name) + `}}`)
		if _, err := nss.Patch(ctx, o.Name, types.ApplyPatchType, bare, metav1.PatchOptions{FieldManager: kube.FieldManager, Force: ptr.To(true)}); err != nil {
			return Outcome{}, fmt.Errorf("remove gpuctl's labels from namespace %s: %w", o.Name, err)
		}
		released = append(released, o.Name)
	}
	var parts []string
	if len(deleted) > 0 {
		parts = append(parts, "deleted "+strings.Join(deleted, ", "))
	}
	if len(released) > 0 {
		parts = append(parts, "removed gpuctl's labels from "+strings.Join(released, ", ")+" (found, kept)")
	}
	if len(parts) == 0 {
		return Outcome{Skipped: true, Message: "none left"}, nil
	}
	return Outcome{Changed: true, Message: strings.Join(parts, "; ")}, nil
}

func (u *Uninstaller) updateRecord(ctx context.Context, _ func(string)) (Outcome, error) {
	switch {
	case u.Record == nil:
		return Outcome{Skipped: true, Message: "none"}, nil
	case u.Purge:
		if err := record.Delete(ctx, u.Clients.Kube); err != nil {
			return Outcome{}, err
		}
		return Outcome{Changed: true, Message: "deleted"}, nil
	case u.Record.Uninstalled:
		return Outcome{Skipped: true, Message: "already says uninstalled; uninstall --purge removes what gpuctl created"}, nil
	}
	r := *u.Record
	r.Uninstalled, r.Command, r.Result, r.Updated = true, "uninstall", "succeeded", time.Now().UTC()
	// Every custom resource gpuctl created is gone (the plan deleted them by UID).
	r.Releases, r.TaintedNodes, r.CustomResources, r.TracksCustomResources = nil, nil, nil, true
	if err := record.Write(ctx, u.Clients.Kube, &r); err != nil {
		return Outcome{}, err
	}
	kept := len(record.CreatedNames(r.CRDs)) + len(record.CreatedNames(r.Namespaces)) + len(record.CreatedNames(r.Objects))
	msg := "marked uninstalled"
	if kept > 0 {
		msg += fmt.Sprintf("; it keeps the %d CRDs, namespaces and other objects gpuctl created, for uninstall --purge", kept)
	}
	return Outcome{Changed: true, Message: msg}, nil
}
