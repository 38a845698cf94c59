package runner

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
)

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

// targets are the releases to remove: the recorded ones, or (no record: an install by an older gpuctl,
// or a record someone deleted) gpuctl's release names in the namespace that exist, which Plan takes
// only with --adopt (RefuseUnrecorded).
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
		csvs = u.installedCSVs(ctx, r.namespace)
	}
	// Helm's uninstall deletes its release's objects by name and takes no preconditions (helm.sh/helm/v4
	// pkg/action/uninstall.go, pkg/kube Client.Delete at v4.3.1): an object of the release's manifest
	// that someone replaced goes too. Every other delete of uninstall's carries the object's UID.
	if err := rc.Uninstall(ctx, r.name); err != nil {
		return Outcome{}, fmt.Errorf("uninstall release %s: %w", r.name, err)
	}
	msg := fmt.Sprintf("uninstalled %s revision %d (%s %s)", r.name, last.Revision, last.Chart, last.ChartVersion)
	for _, csv := range csvs {
		said, err := u.deleteCSV(ctx, r.namespace, csv)
		if err != nil {
			return Outcome{}, err
		}
		if said != "" {
			msg += ", " + said
		}
	}
	// NFD's workers leave a NodeFeature object per node in the release's namespace: the plan names them.
	if _, err := u.deleteObjects(ctx, u.p.deletions(releaseStep(r.name)), progress); err != nil {
		return Outcome{}, fmt.Errorf("delete NodeFeature objects: %w", err)
	}
	return Outcome{Changed: true, Message: msg}, nil
}

// installedCSVs names the ClusterServiceVersions the Subscriptions in namespace ns installed (none
// when they cannot be listed).
func (u *Uninstaller) installedCSVs(ctx context.Context, ns string) []string {
	subs, err := u.Clients.Dynamic.Resource(kube.SubscriptionsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
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

// deleteCSV deletes ClusterServiceVersion csv in namespace ns, the one the Subscription installed (its
// UID as read now the precondition: one someone made in its place since stays), and waits until it
// and the Deployments it owned are gone; it says what it did ("" when the CSV was gone). OLM's owner references do not
// block the CSV's deletion (they are non-blocking), so the garbage collector removes the operator's
// Deployment some time after the CSV is gone: waiting for those too means the operator is really gone
// when the step ends.
func (u *Uninstaller) deleteCSV(ctx context.Context, ns, csv string) (string, error) {
	ri := u.Clients.Dynamic.Resource(kube.CSVsGVR).Namespace(ns)
	obj, err := ri.Get(ctx, csv, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read ClusterServiceVersion %s: %w", csv, err)
	}
	uid := obj.GetUID()
	owned, err := u.ownedDeployments(ctx, ns, uid)
	if err != nil {
		return "", fmt.Errorf("list the Deployments of ClusterServiceVersion %s: %w", csv, err)
	}
	err = ri.Delete(ctx, csv, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case apierrors.IsConflict(err):
		return "kept: ClusterServiceVersion " + csv + " is not the one the Subscription installed (UID differs)", nil
	case err != nil:
		return "", fmt.Errorf("delete ClusterServiceVersion %s: %w", csv, err)
	}
	if err := u.waitGone(ctx, ri, "ClusterServiceVersion", csv, uid); err != nil {
		return "", err
	}
	deployments := u.Clients.Dynamic.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace(ns)
	for _, d := range owned {
		if err := u.waitGone(ctx, deployments, "Deployment", d, ""); err != nil {
			return "", err
		}
	}
	return "deleted ClusterServiceVersion " + csv, nil
}

// ownedDeployments names the Deployments in namespace ns that owner owns.
func (u *Uninstaller) ownedDeployments(ctx context.Context, ns string, owner types.UID) ([]string, error) {
	deps, err := u.Clients.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var owned []string
	for _, d := range deps.Items {
		for _, ref := range d.OwnerReferences {
			if ref.UID == owner {
				owned = append(owned, d.Name)
			}
		}
	}
	return owned, nil
}
