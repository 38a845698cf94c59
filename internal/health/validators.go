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
	v := &validatorWait{
		namespace:   namespace,
		known:       SortedUniqueNames(known),
		gpuSelector: labels.SelectorFromSet(labels.Set{GPUPresentLabel: "true"}),
		podSelector: labels.SelectorFromSet(labels.Set{"app": validatorApp}),
	}
	err := w.until(ctx, waitSpec{
		what:            "GPU Operator validators in " + namespace,
		sources:         v.sources(w),
		namespace:       func() string { return namespace },
		pendingAreNodes: true,
		eval:            v.eval,
	})
	return v.validated, err
}

// validatorWait is one ValidatorsReady: what it watches and the nodes it last saw validated.
type validatorWait struct {
	namespace string
	// known are the GPU nodes gpuctl knows of, sorted.
	known                    []string
	gpuSelector, podSelector labels.Selector
	// nodes are the nodes labelled GPUPresentLabel=true, knownNodes the known ones (nil when none is
	// known), pods the validator pods.
	nodes, knownNodes, pods *source
	validated               []string
}

// sources builds the informers the wait reads: GPU-labelled nodes, the known nodes, validator pods.
func (v *validatorWait) sources(w *Waiter) []*source {
	v.nodes = w.nodeSource(nil, v.gpuSelector.String(), GPUPresentLabel)
	sources := []*source{v.nodes}
	if len(v.known) > 0 {
		v.knownNodes = w.nodeSource(v.known, "")
		sources = append(sources, v.knownNodes)
	}
	pods := w.Kube.CoreV1().Pods(v.namespace)
	v.pods = newSource("validator pods", w.Kube, &corev1.Pod{},
		withSelectors(v.podSelector.String(), "", asObject(pods.List)),
		withSelectors(v.podSelector.String(), "", pods.Watch))
	return append(sources, v.pods)
}

// eval: done when every GPU node has a Ready validator; while there is no GPU node it waits on.
func (v *validatorWait) eval(time.Time) verdict {
	gpuNodes := v.gpuNodes()
	if len(gpuNodes) == 0 {
		return verdict{progress: Progress{Message: "waiting for GPU nodes: no node is labelled " + GPUPresentLabel + "=true yet"}}
	}
	validated := v.validatedNodes()
	var pending, done []string
	for _, n := range gpuNodes {
		if validated[n] {
			done = append(done, n)
		} else {
			pending = append(pending, n)
		}
	}
	v.validated = done
	return verdict{
		progress: Progress{Done: len(done), Total: len(gpuNodes), Message: fmt.Sprintf("%d/%d GPU nodes validated", len(done), len(gpuNodes)), Pending: pending},
		done:     len(pending) == 0,
	}
}

// gpuNodes are the GPU nodes now, sorted: those labelled GPUPresentLabel=true and the known ones that
// still exist (a known node scaled down while waiting has nothing left to validate).
func (v *validatorWait) gpuNodes() []string {
	// Filter again: selectors are the server's job, but a cache must never be trusted blindly with them.
	var gpuNodes []string
	for _, n := range cachedNodes(v.nodes) {
		if v.gpuSelector.Matches(labels.Set(n.Labels)) {
			gpuNodes = append(gpuNodes, n.Name)
		}
	}
	if v.knownNodes != nil {
		existing := cachedNodes(v.knownNodes)
		for _, name := range v.known {
			if existing[name] != nil {
				gpuNodes = append(gpuNodes, name)
			}
		}
	}
	return SortedUniqueNames(gpuNodes)
}

// validatedNodes are the nodes with a Ready validator pod that is not going away.
func (v *validatorWait) validatedNodes() map[string]bool {
	validated := make(map[string]bool)
	for _, o := range v.pods.objects() {
		p, ok := o.(*corev1.Pod)
		if ok && p.Namespace == v.namespace && v.podSelector.Matches(labels.Set(p.Labels)) && p.DeletionTimestamp == nil && podReady(p) {
			validated[p.Spec.NodeName] = true
		}
	}
	return validated
}

// podReady: the pod's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
