package uninstall

import (
	"context"
	"fmt"
	"slices"
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

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// FinalizerError names an object a finalizer keeps from going away.
type FinalizerError struct {
	Object     string
	Finalizers []string
	Waited     time.Duration
}

// Error names the object, how long it was waited for, and the finalizers that hold it.
func (e *FinalizerError) Error() string {
	return fmt.Sprintf("%s is still there after %s: finalizer %s holds it", e.Object, e.Waited.Round(time.Second), strings.Join(e.Finalizers, ", "))
}

// Hint says how to get past the finalizer: its controller removes it, or the user does.
func (fe *FinalizerError) Hint() string {
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

// deletePlanned deletes the plan's objects of one step, each only while it has the planned UID,
// and waits until they are gone. See propagation for how.
func (e *execution) deletePlanned(ctx context.Context, step string, progress func(string)) (runner.Outcome, error) {
	planned := e.p.deletions(step)
	var kept []string
	if step == stepDeleteCustomResources || step == stepDeleteNFDInstance {
		for _, k := range e.p.Kept {
			if (k.Kind == "NodeFeatureDiscovery") == (step == stepDeleteNFDInstance) {
				kept = append(kept, "kept "+k.String())
			}
		}
	}
	deleted, err := e.deleteObjects(ctx, planned, progress)
	if err != nil {
		return runner.Outcome{}, err
	}
	if len(deleted) == 0 {
		return runner.Outcome{Skipped: true, Message: strings.Join(append([]string{"none of gpuctl's found"}, kept...), "; ")}, nil
	}
	return runner.Outcome{Changed: true, Message: strings.Join(append([]string{"deleted " + strings.Join(deleted, ", ")}, kept...), "; ")}, nil
}

// propagation is how an object of kind is deleted. Foreground, as a rule: the API server removes an
// object deleted so only once the garbage collector has removed every dependent that blocks its
// owner's deletion, so when the object is gone, what it owned is gone too.
//
// A ClusterPolicy is deleted in the background, as `helm uninstall` of NVIDIA's chart deletes it.
// NVIDIA's controller keeps reconciling a ClusterPolicy that is being deleted: it checks no deletion
// timestamp, leaves the owned objects to the garbage collector, and re-creates every operand the
// collector deletes (it watches them, and requeues a policy that is not ready every 5 s;
// NVIDIA/gpu-operator controllers/clusterpolicy_controller.go at v26.7.0). Deleted in the
// foreground, the policy can so stay for minutes on a busy control plane, the collector and the
// controller taking turns. Gone at once, the controller's next reconcile finds nothing and stops,
// and the collector removes the operands, whose owner no longer exists. waitDependents then waits
// for them. The NVIDIADriver and GPUCluster controllers handle their objects' deletion
// (nvidiadriver_controller.go, gpucluster_controller.go), so those stay in the foreground.
func propagation(kind string) metav1.DeletionPropagation {
	if kind == "ClusterPolicy" {
		return metav1.DeletePropagationBackground
	}
	return metav1.DeletePropagationForeground
}

// deleteObjects deletes planned objects (see propagation; their UID as precondition) and waits until
// they are gone; it returns the ones it deleted.
func (e *execution) deleteObjects(ctx context.Context, planned []PlannedDeletion, progress func(string)) ([]string, error) {
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
		var ri dynamic.ResourceInterface = e.Clients.Dynamic.Resource(gvr)
		if d.Namespace != "" {
			ri = e.Clients.Dynamic.Resource(gvr).Namespace(d.Namespace)
		}
		uid := d.UID
		tracked := d.Kind == "ClusterPolicy" || d.Kind == "GPUCluster" || d.Kind == "NVIDIADriver"
		if tracked {
			// Before it goes, so the DaemonSets it owns now are known when they are gone too.
			if err := e.trackOwner(ctx, uid); err != nil {
				return nil, err
			}
		}
		err = ri.Delete(ctx, d.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(propagation(d.Kind)),
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
	}
	var deleted []string
	for _, t := range targets {
		progress("waiting for " + t.d.String() + " and what it owns to go")
		if err := e.waitGone(ctx, t.ri, t.d.Kind, t.d.Name, t.d.UID); err != nil {
			return nil, err
		}
		deleted = append(deleted, t.d.String())
	}
	return deleted, nil
}

// resourceOf is the resource name of the kinds uninstall plans deletions of.
func resourceOf(kind string) string {
	for _, r := range record.StackResources() {
		if r.Kind == kind {
			return r.GVR.Resource
		}
	}
	if kind == "NodeFeature" {
		return nodeFeaturesGVR.Resource
	}
	return strings.ToLower(kind) + "s"
}

// waitGone waits up to FinalizerWait for an object to be gone (or replaced: another UID), then names
// what holds it: its finalizers, or, for a foreground deletion, the dependents still there.
func (e *execution) waitGone(ctx context.Context, ri dynamic.ResourceInterface, kind, name string, uid types.UID) error {
	var last *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(ctx, time.Second, e.FinalizerWait, true, func(ctx context.Context) (bool, error) {
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
			return &FinalizerError{Object: obj, Finalizers: fs, Waited: e.FinalizerWait}
		}
		if len(fs) < len(last.GetFinalizers()) {
			left, lerr := e.dependentsOf(ctx, last.GetUID())
			if lerr == nil && len(left) > 0 {
				return fmt.Errorf("%s is still there after %s: the garbage collector has not yet removed what it owns: %s", obj, e.FinalizerWait, strings.Join(left, ", "))
			}
		}
		return fmt.Errorf("%s is still there after %s (deleting since %v)", obj, e.FinalizerWait, last.GetDeletionTimestamp())
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

// trackOwner adds uid to the owners whose dependents uninstall waits for, with the DaemonSets it
// owns now.
func (e *execution) trackOwner(ctx context.Context, uid types.UID) error {
	e.owners[uid] = true
	_, err := e.dependents(ctx)
	return err
}

// dependents names the objects of dependentResources that one of e.owners owns, directly or
// through a DaemonSet (its pods). The DaemonSets found are added to e.owners.
func (e *execution) dependents(ctx context.Context) ([]string, error) {
	return e.scanDependents(ctx, e.owners)
}

// dependentsOf names what the object of uid owns now.
func (e *execution) dependentsOf(ctx context.Context, uid types.UID) ([]string, error) {
	return e.scanDependents(ctx, map[types.UID]bool{uid: true})
}

// scanDependents names the objects of dependentResources that an owner in owners owns, directly or
// through a DaemonSet, whose UID it adds to owners.
func (e *execution) scanDependents(ctx context.Context, owners map[types.UID]bool) ([]string, error) {
	namespaced, cluster := dependentResources()
	var out []string
	scan := func(gvr schema.GroupVersionResource, ri dynamic.ResourceInterface) error {
		list, err := ri.List(ctx, metav1.ListOptions{})
		// The API server authorizes before it looks the resource up: a caller without RBAC on a kind
		// the cluster does not serve (SecurityContextConstraints off OpenShift) is told 403, not 404.
		if kube.Absent(err) || apierrors.IsForbidden(err) && !served(e.Clients.Mapper, gvr) {
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
		if err := scan(gvr, e.Clients.Dynamic.Resource(gvr).Namespace(e.p.namespace)); err != nil {
			return nil, err
		}
	}
	for _, gvr := range cluster {
		if err := scan(gvr, e.Clients.Dynamic.Resource(gvr)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// waitDependents waits until nothing the deleted ClusterPolicy and NVIDIADriver objects owned is
// left: a ClusterPolicy's operands, which the garbage collector removes after the policy (see
// propagation), and what the operator's last reconcile created while an owner went, which the
// collector removes once it sees the owner gone
// (https://kubernetes.io/docs/concepts/architecture/garbage-collection/).
func (e *execution) waitDependents(ctx context.Context, progress func(string)) (runner.Outcome, error) {
	if len(e.owners) == 0 {
		return runner.Outcome{Skipped: true, Message: "gpuctl deleted no ClusterPolicy or NVIDIADriver"}, nil
	}
	var left []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, e.FinalizerWait, true, func(ctx context.Context) (bool, error) {
		l, err := e.dependents(ctx)
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
		return runner.Outcome{}, fmt.Errorf("still there after %s: %s", e.FinalizerWait, strings.Join(left, ", "))
	}
	if err != nil {
		return runner.Outcome{}, err
	}
	return runner.Outcome{Message: "none left"}, nil
}
