package uninstall

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// uninstallRelease uninstalls a release; on OpenShift (an olm-operator release: a Subscription) it
// also deletes the ClusterServiceVersion the Subscription installed, which OLM keeps otherwise
// (https://docs.openshift.com/container-platform/latest/operators/admin/olm-deleting-operators-from-cluster.html).
func (e *execution) uninstallRelease(ctx context.Context, r PlannedRelease, progress func(string)) (runner.Outcome, error) {
	rc, err := e.releases.In(r.Namespace)
	if err != nil {
		return runner.Outcome{}, err
	}
	last, err := rc.Last(r.Name)
	if err != nil {
		return runner.Outcome{}, err
	}
	if last == nil {
		return runner.Outcome{Skipped: true, Message: "not installed"}, nil
	}
	var csvs []string
	if last.Chart == plan.OLMChart {
		csvs = installedCSVs(ctx, e.Clients.Dynamic, r.Namespace)
	}
	// Helm's uninstall deletes its release's objects by name and takes no preconditions (helm.sh/helm/v4
	// pkg/action/uninstall.go, pkg/kube Client.Delete at v4.3.1): an object of the release's manifest
	// that someone replaced goes too. Every other delete of uninstall's carries the object's UID.
	if err := rc.Uninstall(ctx, r.Name); err != nil {
		return runner.Outcome{}, fmt.Errorf("uninstall release %s: %w", r.Name, err)
	}
	msg := fmt.Sprintf("uninstalled %s revision %d (%s %s)", r.Name, last.Revision, last.Chart, last.ChartVersion)
	for _, csv := range csvs {
		said, err := e.deleteCSV(ctx, r.Namespace, csv)
		if err != nil {
			return runner.Outcome{}, err
		}
		if said != "" {
			msg += ", " + said
		}
	}
	// NFD's workers leave a NodeFeature object per node in the release's namespace: the plan names them.
	if _, err := e.deleteObjects(ctx, e.p.deletions(releaseStep(r.Name)), progress); err != nil {
		return runner.Outcome{}, fmt.Errorf("delete NodeFeature objects: %w", err)
	}
	return runner.Outcome{Changed: true, Message: msg}, nil
}

// deleteCSV deletes ClusterServiceVersion csv in namespace ns, the one the Subscription installed (its
// UID as read now the precondition: one someone made in its place since stays), and waits until it
// and the Deployments it owned are gone; it says what it did ("" when the CSV was gone). OLM's owner references do not
// block the CSV's deletion (they are non-blocking), so the garbage collector removes the operator's
// Deployment some time after the CSV is gone: waiting for those too means the operator is really gone
// when the step ends.
func (e *execution) deleteCSV(ctx context.Context, ns, csv string) (string, error) {
	ri := e.Clients.Dynamic.Resource(kube.CSVsGVR).Namespace(ns)
	obj, err := ri.Get(ctx, csv, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read ClusterServiceVersion %s: %w", csv, err)
	}
	uid := obj.GetUID()
	owned, err := e.ownedDeployments(ctx, ns, uid)
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
	if err := e.waitGone(ctx, ri, "ClusterServiceVersion", csv, uid); err != nil {
		return "", err
	}
	deployments := e.Clients.Dynamic.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace(ns)
	for _, d := range owned {
		if err := e.waitGone(ctx, deployments, "Deployment", d, ""); err != nil {
			return "", err
		}
	}
	return "deleted ClusterServiceVersion " + csv, nil
}

// ownedDeployments names the Deployments in namespace ns that owner owns.
func (e *execution) ownedDeployments(ctx context.Context, ns string, owner types.UID) ([]string, error) {
	deps, err := e.Clients.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
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
