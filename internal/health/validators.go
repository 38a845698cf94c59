package health

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// ValidatorsReady waits until every GPU node runs a Ready nvidia-operator-validator pod in namespace, and
// returns the nodes it saw validated (sorted). The GPU nodes are those named in known — the ones gpuctl knows
// of, from detection and NFD's labels — that still exist, plus every node labelled nvidia.com/gpu.present=true.
//
// The validator pod is Ready only after its init containers validated the driver, the container toolkit, a CUDA
// workload and the device plugin on that node, in that order (NVIDIA/gpu-operator
// controllers/state_manager.go@v26.7.0), so this is the strongest "GPUs work" signal the operator gives. It watches
// the nodes and the validator pods at once, because the set of GPU nodes may change while waiting: the operator labels
// nodes after NFD labels them. A known node counts from the start, labelled or not: the wait must not end while a GPU
// node the operands cannot reach (an untolerated taint keeps NFD's worker and the operands off it, so it is never
// labelled) has no validator.
// While there is no GPU node yet the wait goes on (ClusterPolicyReady is the wait that fails on NoGPUNodes).
// Progress reads "3/4 GPU nodes validated" with the unvalidated nodes as Pending.
func (w *Waiter) ValidatorsReady(ctx context.Context, namespace string, known []string) ([]string, error) {
	gpuSelector := labels.SelectorFromSet(labels.Set{GPUPresentLabel: "true"})
	podSelector := labels.SelectorFromSet(labels.Set{"app": validatorApp})
	known = sortedUnique(known)

	nodeSrc := w.nodeSource(nil, gpuSelector.String(), GPUPresentLabel)
	sources := []*source{nodeSrc}
	var knownSrc *source
	if len(known) > 0 {
		knownSrc = w.nodeSource(known, "")
		sources = append(sources, knownSrc)
	}
	pods := w.Kube.CoreV1().Pods(namespace)
	podSrc := newSource("validator pods", w.Kube, &corev1.Pod{},
		withSelectors(podSelector.String(), "", asObject(pods.List)),
		withSelectors(podSelector.String(), "", pods.Watch))
	sources = append(sources, podSrc)

	var validatedNodes []string
	err := w.until(ctx, waitSpec{
		what:            "GPU Operator validators in " + namespace,
		sources:         sources,
		namespace:       func() string { return namespace },
		pendingAreNodes: true,
		eval: func(time.Time) verdict {
			// Filter again: selectors are the server's job, but a cache must never be trusted blindly with them.
			var gpuNodes []string
			for _, n := range cachedNodes(nodeSrc) {
				if gpuSelector.Matches(labels.Set(n.Labels)) {
					gpuNodes = append(gpuNodes, n.Name)
				}
			}
			if knownSrc != nil {
				// A known node that is gone (scaled down while waiting) has nothing left to validate.
				existing := cachedNodes(knownSrc)
				for _, name := range known {
					if existing[name] != nil {
						gpuNodes = append(gpuNodes, name)
					}
				}
			}
			gpuNodes = sortedUnique(gpuNodes)
			if len(gpuNodes) == 0 {
				return verdict{progress: Progress{Message: "waiting for GPU nodes: no node is labelled " + GPUPresentLabel + "=true yet"}}
			}
			validated := make(map[string]bool)
			for _, o := range podSrc.objects() {
				p, ok := o.(*corev1.Pod)
				if ok && p.Namespace == namespace && podSelector.Matches(labels.Set(p.Labels)) && p.DeletionTimestamp == nil && podReady(p) {
					validated[p.Spec.NodeName] = true
				}
			}
			var pending, done []string
			for _, n := range gpuNodes {
				if validated[n] {
					done = append(done, n)
				} else {
					pending = append(pending, n)
				}
			}
			validatedNodes = done
			return verdict{
				progress: Progress{Done: len(done), Total: len(gpuNodes), Message: fmt.Sprintf("%d/%d GPU nodes validated", len(done), len(gpuNodes)), Pending: pending},
				done:     len(pending) == 0,
			}
		},
	})
	return validatedNodes, err
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
