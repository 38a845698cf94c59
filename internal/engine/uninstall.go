package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/lock"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// UninstallOptions are the choices of `gpuctl uninstall`.
type UninstallOptions struct {
	// Purge also deletes the CRDs and namespaces gpuctl created (never ones it found), and the record.
	Purge bool
	// Timeout bounds the whole run (default 10m).
	Timeout time.Duration
	// FinalizerWait is how long a deleted object may stay before uninstall stops and names what holds
	// it (default 2m).
	FinalizerWait time.Duration
	// WaitForLock is how long to wait for another run's install lock (0: fail at once with ErrLocked).
	WaitForLock time.Duration
}

// Uninstall removes what gpuctl installed, in the reverse order of install: the ClusterPolicy and
// NVIDIADriver objects first (the operator removes its operands while it still runs), then the
// operator release, Google's driver installer, NFD, then the taints gpuctl added and the node labels
// NFD and the operator left. Helm's own `helm uninstall` leaves CRDs, custom resources and node labels
// behind (NVIDIA/gpu-operator docs: "Uninstall"), which is why this is more than a release deletion.
type Uninstall struct {
	Clients *kube.Clients
	Options UninstallOptions
	Sink    Sink
}

// UninstallResult is what Uninstall did.
type UninstallResult struct {
	Steps []StepResult `json:"steps"`
	// Changed is false when there was nothing to uninstall.
	Changed bool `json:"changed"`
}

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
	nvidiaDriversGVR = schema.GroupVersionResource{Group: "nvidia.com", Version: "v1alpha1", Resource: "nvidiadrivers"}
	nodeFeaturesGVR  = schema.GroupVersionResource{Group: "nfd.k8s-sigs.io", Version: "v1alpha1", Resource: "nodefeatures"}
	nfdInstancesGVR  = schema.GroupVersionResource{Group: "nfd.openshift.io", Version: "v1", Resource: "nodefeaturediscoveries"}
)

// uninstallStep is one step of an uninstall.
type uninstallStep struct {
	id, title string
	run       func(ctx context.Context, progress func(string)) (stepOutcome, error)
	// hint is said when the step fails.
	hint string
}

// Run uninstalls.
func (u *Uninstall) Run(ctx context.Context) (res *UninstallResult, err error) {
	o := u.Options
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.FinalizerWait == 0 {
		o.FinalizerWait = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	sink := u.Sink
	if sink == nil {
		sink = SinkFunc(func(Event) {})
	}
	held, err := (&lock.Lock{Client: u.Clients.Kube.CoordinationV1(), Wait: o.WaitForLock, OnWait: func(e *lock.HeldError) {
		sink.Event(Event{Time: time.Now(), Type: Warning, Message: fmt.Sprintf("waiting up to %s: %s", o.WaitForLock, e)})
	}}).Acquire(ctx)
	if err != nil {
		return &UninstallResult{}, err
	}
	defer func() {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer rcancel()
		_ = held.Release(rctx)
		if err == nil && o.Purge {
			// --purge leaves nothing of gpuctl's: the lock's Lease goes too, once released (a run
			// waiting for it creates it again).
			purgeLease(rctx, u.Clients)
		}
	}()
	if h := held.TookOver; h != nil {
		sink.Event(Event{Time: time.Now(), Type: Warning, Message: fmt.Sprintf("took over the install lock of %s: that process is gone", h)})
	}
	var stop context.CancelFunc
	ctx, stop = context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-held.Lost():
			stop()
		case <-ctx.Done():
		}
	}()

	rec, err := ReadRecord(ctx, u.Clients.Kube)
	if err != nil {
		return &UninstallResult{}, err
	}
	un := &uninstaller{clients: u.Clients, rec: rec, opts: o, sink: sink, releases: map[string]*release.Client{}}
	steps, err := un.steps(ctx)
	if err != nil {
		return &UninstallResult{}, err
	}
	res = &UninstallResult{}
	for i, s := range steps {
		base := Event{Step: s.id, Title: s.title, Index: i + 1, Count: len(steps)}
		emit := func(e Event) {
			e.Step, e.Title, e.Index, e.Count, e.Time = base.Step, base.Title, base.Index, base.Count, time.Now()
			sink.Event(e)
		}
		emit(Event{Type: StepStarted})
		out, err := s.run(ctx, func(msg string) { emit(Event{Type: StepProgress, Message: msg}) })
		if err != nil {
			ev := Event{Type: StepFailed, Err: err.Error(), Hint: s.hint}
			var fe *FinalizerError
			if errors.As(err, &fe) {
				ev.Hint = finalizerHint(fe)
			}
			if errors.Is(err, context.Canceled) {
				ev.Err, ev.Hint = "interrupted", "run gpuctl uninstall again: it continues where it stopped"
			}
			emit(ev)
			res.Steps = append(res.Steps, StepResult{ID: s.id, Title: s.title, Outcome: StepFailed, Message: ev.Err})
			return res, fmt.Errorf("%s: %w", strings.ToLower(s.title[:1])+s.title[1:], err)
		}
		typ := StepSucceeded
		if out.skipped {
			typ = StepSkipped
		}
		emit(Event{Type: typ, Message: out.message})
		res.Changed = res.Changed || out.changed
		res.Steps = append(res.Steps, StepResult{ID: s.id, Title: s.title, Outcome: typ, Message: out.message, Changed: out.changed})
	}
	return res, nil
}

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

// uninstaller holds what the steps share.
type uninstaller struct {
	clients  *kube.Clients
	rec      *Record
	opts     UninstallOptions
	sink     Sink
	releases map[string]*release.Client
}

func (u *uninstaller) releaseClient(ns string) (*release.Client, error) {
	if rc, ok := u.releases[ns]; ok {
		return rc, nil
	}
	rc, err := release.New(u.clients.Getter, ns, nil)
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
func (u *uninstaller) targets() ([]uninstallRelease, error) {
	var out []uninstallRelease
	if u.rec != nil {
		for _, r := range u.rec.Releases {
			out = append(out, uninstallRelease{r.Name, r.Namespace})
		}
	} else {
		for _, name := range []string{plan.MonitoringRelease, plan.OperatorRelease, plan.GKEDriverInstaller + "-cos", plan.GKEDriverInstaller + "-ubuntu", plan.NFDRelease} {
			out = append(out, uninstallRelease{name, u.clients.Namespace})
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

func (u *uninstaller) namespace() string {
	if u.rec != nil && u.rec.Namespace != "" {
		return u.rec.Namespace
	}
	return u.clients.Namespace
}

func (u *uninstaller) policyName() string {
	if u.rec != nil && u.rec.Distribution == "openshift" {
		return plan.OpenShiftPolicyName
	}
	return plan.ClusterPolicyName
}

// ours reports whether gpuctl installed the release (so the labels of its stack are gpuctl's to remove).
func (u *uninstaller) ours(names ...string) bool {
	if u.rec == nil {
		return true
	}
	for _, n := range names {
		if u.rec.Release(n) != nil {
			return true
		}
	}
	return false
}

func (u *uninstaller) steps(ctx context.Context) ([]uninstallStep, error) {
	rels, err := u.targets()
	if err != nil {
		return nil, err
	}
	var steps []uninstallStep
	policy := u.policyName()
	steps = append(steps, uninstallStep{id: "delete-clusterpolicy", title: "Delete ClusterPolicy " + policy + " and NVIDIADriver objects",
		run: u.deletePolicies, hint: "kubectl get clusterpolicy,nvidiadriver shows them"})
	steps = append(steps, uninstallStep{id: "wait-operands", title: "Wait for the operator to remove its operands", run: u.waitOperands,
		hint: "kubectl -n " + u.namespace() + " get daemonsets,pods shows what is left"})
	for _, r := range rels {
		r := r
		if r.name == "nfd-operator" {
			steps = append(steps, uninstallStep{id: "delete-nfd-instance", title: "Delete the NodeFeatureDiscovery instance", run: u.deleteNFDInstance})
		}
		steps = append(steps, uninstallStep{id: "uninstall-" + r.name, title: "Uninstall release " + r.name,
			run:  func(ctx context.Context, _ func(string)) (stepOutcome, error) { return u.uninstallRelease(ctx, r) },
			hint: "helm history " + r.name + " -n " + r.namespace + " shows the release's revisions"})
	}
	steps = append(steps, uninstallStep{id: "untaint", title: "Remove the taints gpuctl added", run: u.untaint})
	steps = append(steps, uninstallStep{id: "node-labels", title: "Remove the node labels NFD and the operator left", run: u.nodeMetadata})
	if u.opts.Purge {
		steps = append(steps, uninstallStep{id: "purge-objects", title: "Delete the other objects gpuctl created", run: u.purgeObjects})
		steps = append(steps, uninstallStep{id: "purge-crds", title: "Delete the CRDs gpuctl created", run: u.purgeCRDs})
		steps = append(steps, uninstallStep{id: "purge-namespaces", title: "Delete the namespaces gpuctl created", run: u.purgeNamespaces})
	}
	steps = append(steps, uninstallStep{id: "record", title: "Install record " + RecordNamespace + "/" + RecordName, run: u.updateRecord})
	return steps, nil
}

// deletePolicies deletes the ClusterPolicy and every NVIDIADriver, and waits until they are gone.
func (u *uninstaller) deletePolicies(ctx context.Context, progress func(string)) (stepOutcome, error) {
	dyn := u.clients.Dynamic
	var deleted []string
	type target struct {
		ri   dynamic.ResourceInterface
		kind string
		name string
	}
	var targets []target
	policies := dyn.Resource(health.ClusterPolicyResource())
	if _, err := policies.Get(ctx, u.policyName(), metav1.GetOptions{}); err == nil {
		targets = append(targets, target{policies, "ClusterPolicy", u.policyName()})
	} else if !absent(err) {
		return stepOutcome{}, err
	}
	drivers, err := dyn.Resource(nvidiaDriversGVR).List(ctx, metav1.ListOptions{})
	if err != nil && !absent(err) {
		return stepOutcome{}, err
	}
	if drivers != nil {
		for _, d := range drivers.Items {
			targets = append(targets, target{dyn.Resource(nvidiaDriversGVR), "NVIDIADriver", d.GetName()})
		}
	}
	if len(targets) == 0 {
		return stepOutcome{skipped: true, message: "none found"}, nil
	}
	for _, t := range targets {
		if err := t.ri.Delete(ctx, t.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return stepOutcome{}, fmt.Errorf("delete %s %s: %w", t.kind, t.name, err)
		}
		deleted = append(deleted, t.kind+" "+t.name)
	}
	for _, t := range targets {
		progress("waiting for " + t.kind + " " + t.name + " to go")
		if err := u.waitGone(ctx, t.ri, t.kind, t.name); err != nil {
			return stepOutcome{}, err
		}
	}
	return stepOutcome{changed: true, message: "deleted " + strings.Join(deleted, ", ")}, nil
}

// waitGone waits up to FinalizerWait for an object to be gone, then names its finalizers.
func (u *uninstaller) waitGone(ctx context.Context, ri dynamic.ResourceInterface, kind, name string) error {
	var last *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(ctx, time.Second, u.opts.FinalizerWait, true, func(ctx context.Context) (bool, error) {
		obj, err := ri.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		last = obj
		return false, nil
	})
	if err == nil {
		return nil
	}
	if ctx.Err() == nil && last != nil {
		obj := kind + " " + name
		if ns := last.GetNamespace(); ns != "" {
			obj = kind + " " + ns + "/" + name
		}
		if fs := last.GetFinalizers(); len(fs) > 0 {
			return &FinalizerError{Object: obj, Finalizers: fs, Waited: u.opts.FinalizerWait}
		}
		return fmt.Errorf("%s is still there after %s (deleting since %v, no finalizers)", obj, u.opts.FinalizerWait, last.GetDeletionTimestamp())
	}
	return err
}

// waitOperands waits until the DaemonSets the ClusterPolicy and NVIDIADrivers owned, and their pods,
// are gone: the garbage collector removes them once their owner is deleted.
func (u *uninstaller) waitOperands(ctx context.Context, progress func(string)) (stepOutcome, error) {
	ns := u.namespace()
	owned := func(refs []metav1.OwnerReference) bool {
		for _, r := range refs {
			if strings.HasPrefix(r.APIVersion, "nvidia.com/") && (r.Kind == "ClusterPolicy" || r.Kind == "NVIDIADriver") {
				return true
			}
		}
		return false
	}
	left := func(ctx context.Context) ([]string, error) {
		dss, err := u.clients.Kube.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var out []string
		uids := map[types.UID]bool{}
		for _, d := range dss.Items {
			if owned(d.OwnerReferences) {
				out = append(out, "DaemonSet "+d.Name)
				uids[d.UID] = true
			}
		}
		pods, err := u.clients.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, p := range pods.Items {
			for _, r := range p.OwnerReferences {
				if uids[r.UID] || p.Labels["app"] == validatorApp {
					out = append(out, "pod "+p.Name)
					break
				}
			}
		}
		return out, nil
	}
	first, err := left(ctx)
	if err != nil {
		return stepOutcome{}, err
	}
	if len(first) == 0 {
		return stepOutcome{skipped: true, message: "no operands"}, nil
	}
	var remaining []string
	err = wait.PollUntilContextTimeout(ctx, time.Second, u.opts.FinalizerWait, true, func(ctx context.Context) (bool, error) {
		l, err := left(ctx)
		if err != nil {
			return false, err
		}
		remaining = l
		progress(fmt.Sprintf("%d operand objects left", len(l)))
		return len(l) == 0, nil
	})
	if err != nil && ctx.Err() == nil {
		return stepOutcome{}, fmt.Errorf("operands still there after %s: %s", u.opts.FinalizerWait, strings.Join(remaining, ", "))
	}
	if err != nil {
		return stepOutcome{}, err
	}
	return stepOutcome{changed: true, message: fmt.Sprintf("%d DaemonSets and pods removed", len(first))}, nil
}

func (u *uninstaller) deleteNFDInstance(ctx context.Context, _ func(string)) (stepOutcome, error) {
	ri := u.clients.Dynamic.Resource(nfdInstancesGVR).Namespace(plan.OpenShiftNFDNS)
	list, err := ri.List(ctx, metav1.ListOptions{})
	if absent(err) || (err == nil && len(list.Items) == 0) {
		return stepOutcome{skipped: true, message: "none found"}, nil
	}
	if err != nil {
		return stepOutcome{}, err
	}
	var names []string
	for _, o := range list.Items {
		if err := ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return stepOutcome{}, err
		}
		if err := u.waitGone(ctx, ri, "NodeFeatureDiscovery", o.GetName()); err != nil {
			return stepOutcome{}, err
		}
		names = append(names, o.GetName())
	}
	return stepOutcome{changed: true, message: "deleted " + strings.Join(names, ", ")}, nil
}

// uninstallRelease uninstalls a release; on OpenShift (an olm-operator release: a Subscription) it
// also deletes the ClusterServiceVersion the Subscription installed, which OLM keeps otherwise
// (https://docs.openshift.com/container-platform/latest/operators/admin/olm-deleting-operators-from-cluster.html).
func (u *uninstaller) uninstallRelease(ctx context.Context, r uninstallRelease) (stepOutcome, error) {
	rc, err := u.releaseClient(r.namespace)
	if err != nil {
		return stepOutcome{}, err
	}
	last, err := rc.Last(r.name)
	if err != nil {
		return stepOutcome{}, err
	}
	if last == nil {
		return stepOutcome{skipped: true, message: "not installed"}, nil
	}
	var csvs []string
	if last.Chart == plan.OLMChart {
		subs, err := u.clients.Dynamic.Resource(subscriptionsGVR).Namespace(r.namespace).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, s := range subs.Items {
				if csv, _, _ := unstructured.NestedString(s.Object, "status", "installedCSV"); csv != "" {
					csvs = append(csvs, csv)
				}
			}
		}
	}
	if err := rc.Uninstall(ctx, r.name); err != nil {
		return stepOutcome{}, fmt.Errorf("uninstall release %s: %w", r.name, err)
	}
	msg := fmt.Sprintf("uninstalled %s revision %d (%s %s)", r.name, last.Revision, last.Chart, last.ChartVersion)
	for _, csv := range csvs {
		ri := u.clients.Dynamic.Resource(csvsGVR).Namespace(r.namespace)
		// OLM's owner references do not block the CSV's deletion (they are non-blocking), so the
		// garbage collector removes the operator's Deployment some time after the CSV is gone: wait
		// for the Deployments the CSV owned too, so the operator is really gone when this step ends.
		var owned []string
		if obj, err := ri.Get(ctx, csv, metav1.GetOptions{}); err == nil {
			deps, err := u.clients.Kube.AppsV1().Deployments(r.namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return stepOutcome{}, fmt.Errorf("list the Deployments of ClusterServiceVersion %s: %w", csv, err)
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
			return stepOutcome{}, fmt.Errorf("delete ClusterServiceVersion %s: %w", csv, err)
		}
		if err := u.waitGone(ctx, ri, "ClusterServiceVersion", csv); err != nil {
			return stepOutcome{}, err
		}
		deployments := u.clients.Dynamic.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace(r.namespace)
		for _, d := range owned {
			if err := u.waitGone(ctx, deployments, "Deployment", d); err != nil {
				return stepOutcome{}, err
			}
		}
		msg += ", deleted ClusterServiceVersion " + csv
	}
	if releaseOrder(r.name) == 2 {
		// NFD's workers leave a NodeFeature object per node in the release's namespace.
		err := u.clients.Dynamic.Resource(nodeFeaturesGVR).Namespace(r.namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		if err != nil && !absent(err) {
			return stepOutcome{}, fmt.Errorf("delete NodeFeature objects: %w", err)
		}
	}
	return stepOutcome{changed: true, message: msg}, nil
}

func (u *uninstaller) untaint(ctx context.Context, _ func(string)) (stepOutcome, error) {
	res, err := (&taint.Untaint{Client: u.clients.Kube}).Run(ctx, nil)
	if err != nil {
		return stepOutcome{}, err
	}
	n := res.Changed()
	if n == 0 {
		return stepOutcome{skipped: true, message: "no node carries a taint gpuctl added"}, nil
	}
	return stepOutcome{changed: true, message: fmt.Sprintf("%d nodes untainted", n)}, nil
}

// metadataPatch is the merge patch that takes a node's labels and annotations in NFD's and the
// operator's prefixes back to before: keys not there before are removed, keys that were are restored.
// nfd and operator say whose keys may be touched (a stack gpuctl did not install keeps its labels).
func metadataPatch(n *corev1.Node, before NodeMetadata, nfd, operator bool) map[string]any {
	mine := func(k string) bool {
		if !inStackPrefix(k) {
			return false
		}
		if isNFDKey(k) {
			return nfd
		}
		return operator
	}
	diff := func(cur, was map[string]string) map[string]any {
		out := map[string]any{}
		for k, v := range cur {
			if !mine(k) {
				continue
			}
			if old, ok := was[k]; !ok {
				out[k] = nil
			} else if old != v {
				out[k] = old
			}
		}
		for k, old := range was {
			if _, ok := cur[k]; !ok && mine(k) {
				out[k] = old
			}
		}
		return out
	}
	md := map[string]any{}
	if l := diff(n.Labels, before.Labels); len(l) > 0 {
		md["labels"] = l
	}
	if a := diff(n.Annotations, before.Annotations); len(a) > 0 {
		md["annotations"] = a
	}
	if len(md) == 0 {
		return nil
	}
	return map[string]any{"metadata": md}
}

func (u *uninstaller) nodeMetadata(ctx context.Context, _ func(string)) (stepOutcome, error) {
	nfd := u.ours(plan.NFDRelease, "nfd-operator")
	operator := u.ours(plan.OperatorRelease, plan.OperatorPackage)
	if !nfd && !operator {
		return stepOutcome{skipped: true, message: "gpuctl installed neither NFD nor the operator"}, nil
	}
	var before map[string]NodeMetadata
	if u.rec != nil {
		before = u.rec.NodeMetadataBefore
	}
	nodes, err := u.clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return stepOutcome{}, fmt.Errorf("list nodes: %w", err)
	}
	changed := 0
	for i := range nodes.Items {
		n := &nodes.Items[i]
		patch := metadataPatch(n, before[n.Name], nfd, operator)
		if patch == nil {
			continue
		}
		data, err := json.Marshal(patch)
		if err != nil {
			return stepOutcome{}, err
		}
		if _, err := u.clients.Kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, data, metav1.PatchOptions{FieldManager: kube.FieldManager}); err != nil {
			return stepOutcome{}, fmt.Errorf("node %s: %w", n.Name, err)
		}
		changed++
	}
	if changed == 0 {
		return stepOutcome{skipped: true, message: "no labels to remove"}, nil
	}
	return stepOutcome{changed: true, message: fmt.Sprintf("%d nodes back to their labels before the install", changed)}, nil
}

func (u *uninstaller) purgeCRDs(ctx context.Context, progress func(string)) (stepOutcome, error) {
	if u.rec == nil {
		return stepOutcome{skipped: true, message: "no install record: gpuctl cannot tell the CRDs it created from ones it found"}, nil
	}
	crds := u.clients.Extensions.ApiextensionsV1().CustomResourceDefinitions()
	var deleted []string
	for _, name := range CreatedNames(u.rec.CRDs) {
		err := crds.Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return stepOutcome{}, fmt.Errorf("delete CRD %s: %w", name, err)
		}
		deleted = append(deleted, name)
	}
	ri := u.clients.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, name := range deleted {
		progress("waiting for CRD " + name + " to go")
		if err := u.waitGone(ctx, ri, "CustomResourceDefinition", name); err != nil {
			return stepOutcome{}, err
		}
	}
	if len(deleted) == 0 {
		return stepOutcome{skipped: true, message: "none left"}, nil
	}
	u.clients.Refresh()
	return stepOutcome{changed: true, message: fmt.Sprintf("deleted %d: %s", len(deleted), strings.Join(deleted, ", "))}, nil
}

// purgeObjects deletes the objects gpuctl created outside its releases (the NVAIE Secrets, profile
// prerequisites, the PSP RoleBinding): in a namespace gpuctl found, deleting the namespace would not.
func (u *uninstaller) purgeObjects(ctx context.Context, progress func(string)) (stepOutcome, error) {
	if u.rec == nil {
		return stepOutcome{skipped: true, message: "no install record: gpuctl cannot tell the objects it created from ones it found"}, nil
	}
	type gone struct {
		ri   dynamic.ResourceInterface
		o    RecordedObject
		desc string
	}
	var deleted []gone
	for _, o := range u.rec.Objects {
		if !o.Created {
			continue
		}
		ri, err := recordedResource(u.clients, o)
		if absent(err) {
			continue // its kind is no longer served: nothing of it is left
		}
		if err != nil {
			return stepOutcome{}, err
		}
		desc := o.Kind + " " + o.Name
		if o.Namespace != "" {
			desc = o.Kind + " " + o.Namespace + "/" + o.Name
		}
		err = ri.Delete(ctx, o.Name, metav1.DeleteOptions{})
		if absent(err) {
			continue
		}
		if err != nil {
			return stepOutcome{}, fmt.Errorf("delete %s: %w", desc, err)
		}
		deleted = append(deleted, gone{ri, o, desc})
	}
	var names []string
	for _, d := range deleted {
		progress("waiting for " + d.desc + " to go")
		if err := u.waitGone(ctx, d.ri, d.o.Kind, d.o.Name); err != nil {
			return stepOutcome{}, err
		}
		names = append(names, d.desc)
	}
	if len(names) == 0 {
		return stepOutcome{skipped: true, message: "none left"}, nil
	}
	return stepOutcome{changed: true, message: "deleted " + strings.Join(names, ", ")}, nil
}

func (u *uninstaller) purgeNamespaces(ctx context.Context, progress func(string)) (stepOutcome, error) {
	if u.rec == nil {
		return stepOutcome{skipped: true, message: "no install record: gpuctl cannot tell the namespaces it created from ones it found"}, nil
	}
	nss := u.clients.Kube.CoreV1().Namespaces()
	var deleted []string
	for _, name := range CreatedNames(u.rec.Namespaces) {
		err := nss.Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return stepOutcome{}, fmt.Errorf("delete namespace %s: %w", name, err)
		}
		deleted = append(deleted, name)
	}
	ri := u.clients.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	for _, name := range deleted {
		progress("waiting for namespace " + name + " to go")
		if err := u.waitGone(ctx, ri, "Namespace", name); err != nil {
			return stepOutcome{}, err
		}
	}
	// A namespace gpuctl found stays, without the labels gpuctl applied to it (Pod Security Admission's
	// privileged levels): applying the bare namespace as gpuctl's field manager releases the fields only
	// gpuctl owns, and the API server removes them; a label someone else also set stays
	// (https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management).
	var released []string
	for _, o := range u.rec.Namespaces {
		if o.Created {
			continue
		}
		ns, err := nss.Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return stepOutcome{}, fmt.Errorf("read namespace %s: %w", o.Name, err)
		}
		if !slices.ContainsFunc(ns.ManagedFields, func(m metav1.ManagedFieldsEntry) bool {
			return m.Manager == kube.FieldManager && m.Operation == metav1.ManagedFieldsOperationApply
		}) {
			continue
		}
		bare := []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":` + strconv.Quote(o.Name) + `}}`)
		if _, err := nss.Patch(ctx, o.Name, types.ApplyPatchType, bare, metav1.PatchOptions{FieldManager: kube.FieldManager, Force: ptr.To(true)}); err != nil {
			return stepOutcome{}, fmt.Errorf("remove gpuctl's labels from namespace %s: %w", o.Name, err)
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
		return stepOutcome{skipped: true, message: "none left"}, nil
	}
	return stepOutcome{changed: true, message: strings.Join(parts, "; ")}, nil
}

func (u *uninstaller) updateRecord(ctx context.Context, _ func(string)) (stepOutcome, error) {
	switch {
	case u.rec == nil:
		return stepOutcome{skipped: true, message: "none"}, nil
	case u.opts.Purge:
		if err := DeleteRecord(ctx, u.clients.Kube); err != nil {
			return stepOutcome{}, err
		}
		return stepOutcome{changed: true, message: "deleted"}, nil
	case u.rec.Uninstalled:
		return stepOutcome{skipped: true, message: "already says uninstalled; uninstall --purge removes what gpuctl created"}, nil
	}
	r := *u.rec
	r.Uninstalled, r.Command, r.Result, r.Updated = true, "uninstall", "succeeded", time.Now().UTC()
	r.Releases, r.TaintedNodes = nil, nil
	if err := WriteRecord(ctx, u.clients.Kube, &r); err != nil {
		return stepOutcome{}, err
	}
	kept := len(CreatedNames(r.CRDs)) + len(CreatedNames(r.Namespaces)) + len(CreatedNames(r.Objects))
	msg := "marked uninstalled"
	if kept > 0 {
		msg += fmt.Sprintf("; it keeps the %d CRDs, namespaces and other objects gpuctl created, for uninstall --purge", kept)
	}
	return stepOutcome{changed: true, message: msg}, nil
}

// absent reports errors that mean "this kind is not served" or "not found".
func absent(err error) bool {
	return err != nil && (apierrors.IsNotFound(err) || meta.IsNoMatchError(err) || isNoResource(err))
}

// purgeLease deletes the lock's Lease when no run holds it.
func purgeLease(ctx context.Context, clients *kube.Clients) {
	leases := clients.Kube.CoordinationV1().Leases(lock.DefaultNamespace)
	l, err := leases.Get(ctx, lock.DefaultName, metav1.GetOptions{})
	if err != nil || (l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "") {
		return
	}
	_ = leases.Delete(ctx, lock.DefaultName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &l.ResourceVersion}})
}
