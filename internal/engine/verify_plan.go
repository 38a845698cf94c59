package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
)

// plan reads what verify's plan is made of (the operator's namespace, the GPU nodes, the pods earlier
// runs left) and makes it.
func (v *Verify) plan(ctx context.Context, o VerifyOptions, sel labels.Selector) (*plan.VerifyPlan, error) {
	ns, err := v.namespace(ctx)
	if err != nil {
		return nil, err
	}
	nodes, err := v.gpuNodes(ctx, sel, o.Nodes)
	if err != nil {
		return nil, err
	}
	earlier, err := v.earlierPods(ctx, ns)
	if err != nil {
		return nil, err
	}
	in := plan.VerifyInput{Namespace: ns, Image: o.Image, ImagePullSecrets: o.ImagePullSecrets, Nodes: nodes, Earlier: earlier}
	in.RunID = plan.VerifyRunID(in)
	return plan.BuildVerify(in), nil
}

// earlierSelector selects the pods of every verify run.
const earlierSelector = managedByLabel + "=gpuctl," + VerifyNameLabel + "=" + VerifyName

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

// namespace finds the operator's namespace from the install record (or -n for an install that
// predates the record); ErrNotInstalled when there is no GPU stack.
func (v *Verify) namespace(ctx context.Context) (string, error) {
	rec, err := record.Read(ctx, v.Clients.Kube)
	if err != nil {
		return "", err
	}
	if rec != nil && !rec.Uninstalled {
		return rec.Namespace, nil
	}
	ns := v.Clients.Namespace
	if v.Clients.Getter != nil {
		if rc, err := release.New(v.Clients.Getter, ns, nil); err == nil {
			if last, _ := rc.Last(plan.OperatorRelease); last != nil {
				return ns, nil
			}
		}
	}
	return "", fmt.Errorf("%w: no install record %s/%s and no %s release in %s", ErrNotInstalled, record.Namespace, record.Name, plan.OperatorRelease, ns)
}

// gpuNodes lists the nodes labelled nvidia.com/gpu.present=true that sel selects, sorted.
func (v *Verify) gpuNodes(ctx context.Context, sel labels.Selector, selText string) ([]string, error) {
	list, err := v.Clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: GPUPresentLabel + "=true"})
	if err != nil {
		return nil, fmt.Errorf("list GPU nodes: %w", err)
	}
	var all, picked []string
	for _, n := range list.Items {
		all = append(all, n.Name)
		if sel.Matches(labels.Set(n.Labels)) {
			picked = append(picked, n.Name)
		}
	}
	slices.Sort(all)
	slices.Sort(picked)
	switch {
	case len(all) == 0:
		return nil, fmt.Errorf("%w: no node is labelled %s=true", ErrNoGPUNodes, GPUPresentLabel)
	case len(picked) == 0:
		return nil, fmt.Errorf("%w: --nodes %q matches none of the GPU nodes (%s)", ErrInput, selText, strings.Join(all, ", "))
	}
	return picked, nil
}
