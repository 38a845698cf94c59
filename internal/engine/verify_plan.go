package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
)

// plan reads what verify's plan is made of (the operator's namespace, the GPU nodes and what each
// offers, the pods and ResourceClaimTemplates earlier runs left) and makes it.
func (v *Verify) plan(ctx context.Context, o VerifyOptions, sel labels.Selector) (*plan.VerifyPlan, error) {
	ns, dra, err := v.namespace(ctx)
	if err != nil {
		return nil, err
	}
	nodes, err := v.gpuNodes(ctx, sel, o.Nodes)
	if err != nil {
		return nil, err
	}
	requests, err := v.requests(ctx, nodes, dra)
	if err != nil {
		return nil, err
	}
	earlier, err := v.earlierPods(ctx, ns)
	if err != nil {
		return nil, err
	}
	claims := false
	for _, r := range requests {
		claims = claims || r.DeviceClass != ""
	}
	templates, err := v.earlierTemplates(ctx, ns, claims)
	if err != nil {
		return nil, err
	}
	in := plan.VerifyInput{Namespace: ns, Image: o.Image, ImagePullSecrets: o.ImagePullSecrets, Requests: requests, Earlier: earlier, EarlierClaimTemplates: templates}
	for _, n := range nodes {
		in.Nodes = append(in.Nodes, n.Name)
	}
	in.RunID = plan.VerifyRunID(in)
	return plan.BuildVerify(in), nil
}

// requests chooses each node's request (verifyRequest); the DRA driver's ResourceSlices are read only
// when a node offers no GPU resource and the install record does not say DRA.
func (v *Verify) requests(ctx context.Context, nodes []corev1.Node, dra bool) (map[string]plan.VerifyRequest, error) {
	var published map[string]bool
	if !dra && slices.ContainsFunc(nodes, func(n corev1.Node) bool { return needsSlices(&n) }) {
		var err error
		if published, err = v.nodesWithSlices(ctx); err != nil {
			return nil, err
		}
	}
	out := map[string]plan.VerifyRequest{}
	for i := range nodes {
		out[nodes[i].Name] = verifyRequest(&nodes[i], dra, published[nodes[i].Name])
	}
	return out, nil
}

// earlierSelector selects the pods of every verify run.
const earlierSelector = managedByLabel + "=gpuctl," + VerifyNameLabel + "=" + plan.VerifyName

// earlierPods are the verify pods in ns: under the lock, none is a running verify's, so an earlier
// run left them (one killed with SIGKILL cannot clean up).
func (v *Verify) earlierPods(ctx context.Context, ns string) ([]plan.VerifyPodRef, error) {
	list, err := v.Clients.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: earlierSelector})
	if err != nil {
		return nil, fmt.Errorf("list the pods of earlier verify runs in %s: %w", ns, err)
	}
	var out []plan.VerifyPodRef
	for _, p := range list.Items {
		out = append(out, plan.VerifyPodRef{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Run: p.Labels[VerifyRunLabel]})
	}
	return out, nil
}

// earlierTemplates are the ResourceClaimTemplates of verify runs in ns, left as earlierPods are. A
// cluster without the resource.k8s.io/v1 API has none; nor, to a user who may not list them, does one
// this run makes no claim on (claims false): verify needs no more permissions than before outside DRA.
func (v *Verify) earlierTemplates(ctx context.Context, ns string, claims bool) ([]plan.VerifyPodRef, error) {
	list, err := v.Clients.Kube.ResourceV1().ResourceClaimTemplates(ns).List(ctx, metav1.ListOptions{LabelSelector: earlierSelector})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err) && !claims:
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("list the ResourceClaimTemplates of earlier verify runs in %s: %w", ns, err)
	}
	var out []plan.VerifyPodRef
	for _, t := range list.Items {
		out = append(out, plan.VerifyPodRef{Namespace: t.Namespace, Name: t.Name, UID: t.UID, Run: t.Labels[VerifyRunLabel]})
	}
	return out, nil
}

// namespace finds the operator's namespace from the install record (or -n for an install that
// predates the record), and whether gpuctl installed the DRA stack; ErrNotInstalled when there is no
// GPU stack.
func (v *Verify) namespace(ctx context.Context) (string, bool, error) {
	rec, err := record.Read(ctx, v.Clients.Kube)
	if err != nil {
		return "", false, err
	}
	if rec != nil && !rec.Uninstalled {
		return rec.Namespace, rec.Inputs.DRA, nil
	}
	ns := v.Clients.Namespace
	if v.Clients.Getter != nil {
		if rc, err := release.New(v.Clients.Getter, ns, nil); err == nil {
			if last, _ := rc.Last(plan.OperatorRelease); last != nil {
				return ns, false, nil
			}
		}
	}
	return "", false, fmt.Errorf("%w: no install record %s/%s and no %s release in %s", ErrNotInstalled, record.Namespace, record.Name, plan.OperatorRelease, ns)
}

// gpuNodes lists the nodes labelled nvidia.com/gpu.present=true that sel selects, sorted by name.
func (v *Verify) gpuNodes(ctx context.Context, sel labels.Selector, selText string) ([]corev1.Node, error) {
	list, err := v.Clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: health.GPUPresentLabel + "=true"})
	if err != nil {
		return nil, fmt.Errorf("list GPU nodes: %w", err)
	}
	var all []string
	var picked []corev1.Node
	for _, n := range list.Items {
		all = append(all, n.Name)
		if sel.Matches(labels.Set(n.Labels)) {
			picked = append(picked, n)
		}
	}
	slices.Sort(all)
	slices.SortFunc(picked, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	switch {
	case len(all) == 0:
		return nil, fmt.Errorf("%w: no node is labelled %s=true", ErrNoLabelledGPUNodes, health.GPUPresentLabel)
	case len(picked) == 0:
		return nil, fmt.Errorf("%w: --nodes %q matches none of the GPU nodes (%s)", plan.ErrInput, selText, strings.Join(all, ", "))
	}
	return picked, nil
}
