package step

import (
	"context"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/render"
)

// readState reads back what an interrupted step of an install Plan left in the cluster: a release's
// status and revision, how many CRDs are established, how many GPU nodes carry the taint, which
// objects exist ("" for a wait: it changed nothing).
func (x *executor) readState(ctx context.Context, s *plan.Step) (string, error) {
	switch s.Kind {
	case plan.KindSafety:
		return "nothing changed (the check only reads)", nil
	case plan.KindRelease:
		return x.releaseState(s.Release)
	case plan.KindCRDs:
		return x.crdsState(ctx, s)
	case plan.KindTaint:
		return x.taintState(ctx, s.Taint)
	case plan.KindObjects:
		return x.objectsState(ctx, s.Objects)
	case plan.KindSecrets:
		return x.objectsState(ctx, x.secrets)
	case plan.KindClusterPolicy:
		return x.clusterPolicyState(ctx, s.PolicyName)
	case plan.KindNodeLabels, plan.KindMIGAfterGFD:
		return x.labelsState(ctx, s.Labels)
	}
	return "", nil
}

// releaseState is the status and revision of the release's newest revision.
func (x *executor) releaseState(rel *plan.Release) (string, error) {
	rc, err := x.releaseClient(rel.Namespace)
	if err != nil {
		return "", err
	}
	r, err := rc.Last(rel.Name)
	if err != nil {
		return "", err
	}
	if r == nil {
		return "release " + rel.Name + ": not installed", nil
	}
	return fmt.Sprintf("release %s: %s revision %d", r.Name, r.Status, r.Revision), nil
}

// crdsState says how many of the CRDs of the step's charts are established.
func (x *executor) crdsState(ctx context.Context, s *plan.Step) (string, error) {
	var names []string
	for _, name := range s.Charts {
		crds, _, err := render.ChartCRDs(name, s.ChartReleases[name])
		if err != nil {
			return "", err
		}
		for _, c := range crds {
			names = append(names, c.Name)
		}
	}
	established, err := x.establishedCRDs(ctx, names)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d/%d CRDs established", established, len(names)), nil
}

// establishedCRDs counts the CRDs of names that exist and are established.
func (x *executor) establishedCRDs(ctx context.Context, names []string) (int, error) {
	established := 0
	for _, n := range names {
		crd, err := x.clients.Extensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, n, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return 0, err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				established++
			}
		}
	}
	return established, nil
}

// taintState says how many of the run's GPU nodes carry the taint (its key and effect).
func (x *executor) taintState(ctx context.Context, t *plan.Taint) (string, error) {
	// One list, not a GET per GPU node.
	nodes, err := x.clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	gpu := map[string]bool{}
	for _, n := range x.gpuNodes {
		gpu[n] = true
	}
	tainted := 0
	for _, node := range nodes.Items {
		if !gpu[node.Name] {
			continue
		}
		for _, nt := range node.Spec.Taints {
			if nt.Key == t.Key && nt.Effect == corev1.TaintEffect(t.Effect) {
				tainted++
				break
			}
		}
	}
	return fmt.Sprintf("%d/%d GPU nodes tainted %s=%s:%s", tainted, len(x.gpuNodes), t.Key, t.Value, t.Effect), nil
}

// objectsState says how many of objs exist, naming the missing ones.
func (x *executor) objectsState(ctx context.Context, objs []map[string]any) (string, error) {
	var missing []string
	for _, o := range objs {
		u := &unstructured.Unstructured{Object: o}
		exists, err := x.exists(ctx, u)
		if err != nil {
			return "", err
		}
		if !exists {
			missing = append(missing, u.GetKind()+" "+u.GetName())
		}
	}
	msg := fmt.Sprintf("%d/%d objects exist", len(objs)-len(missing), len(objs))
	if len(missing) > 0 {
		msg += " (missing: " + strings.Join(missing, ", ") + ")"
	}
	return msg, nil
}

// clusterPolicyState says whether the ClusterPolicy exists.
func (x *executor) clusterPolicyState(ctx context.Context, name string) (string, error) {
	u, err := x.clients.Dynamic.Resource(health.ClusterPolicyResource()).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "ClusterPolicy " + name + " does not exist", nil
	}
	if err != nil {
		return "", err
	}
	return "ClusterPolicy " + u.GetName() + " exists", nil
}

// exists reports whether the object is in the cluster.
func (x *executor) exists(ctx context.Context, u *unstructured.Unstructured) (bool, error) {
	gvk := u.GroupVersionKind()
	m, err := x.clients.Mapper.RESTMapping(schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}, gvk.Version)
	if err != nil {
		return false, err
	}
	var get func() (*unstructured.Unstructured, error)
	if u.GetNamespace() != "" {
		get = func() (*unstructured.Unstructured, error) {
			return x.clients.Dynamic.Resource(m.Resource).Namespace(u.GetNamespace()).Get(ctx, u.GetName(), metav1.GetOptions{})
		}
	} else {
		get = func() (*unstructured.Unstructured, error) {
			return x.clients.Dynamic.Resource(m.Resource).Get(ctx, u.GetName(), metav1.GetOptions{})
		}
	}
	_, err = get()
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}
