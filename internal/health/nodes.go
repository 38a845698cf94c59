package health

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/fields"
)

// nodeSource watches the named nodes: with a field selector when there is one name, otherwise all nodes (a field
// selector cannot OR names, and node names need not match the kubernetes.io/hostname label). The verdicts filter
// by name either way. The cached nodes keep only the labels keyed in labelKeys.
func (w *Waiter) nodeSource(names []string, labelSelector string, labelKeys ...string) *source {
	field := ""
	if len(names) == 1 {
		field = fields.OneTermEqualSelector("metadata.name", names[0]).String()
	}
	nodes := w.Kube.CoreV1().Nodes()
	src := newSource("nodes", w.Kube, &corev1.Node{},
		withSelectors(labelSelector, field, asObject(nodes.List)),
		withSelectors(labelSelector, field, nodes.Watch))
	src.nodeLabels = labelKeys
	return src
}

// cachedNodes returns the nodes in s by name.
func cachedNodes(s *source) map[string]*corev1.Node {
	out := make(map[string]*corev1.Node)
	for _, o := range s.objects() {
		if n, ok := o.(*corev1.Node); ok {
			out[n.Name] = n
		}
	}
	return out
}

// SortedUniqueNames returns names sorted, without duplicates or empty names.
func SortedUniqueNames(names []string) []string {
	out := slices.DeleteFunc(slices.Clone(names), func(s string) bool { return s == "" })
	slices.Sort(out)
	return slices.Compact(out)
}

// countNodes evaluates ok for each of names and builds the progress; missing nodes are pending.
func countNodes(names []string, nodes map[string]*corev1.Node, ok func(*corev1.Node) bool, message string) verdict {
	var pending []string
	for _, name := range names {
		if n := nodes[name]; n == nil || !ok(n) {
			pending = append(pending, name)
		}
	}
	done := len(names) - len(pending)
	return verdict{
		progress: Progress{Done: done, Total: len(names), Message: fmt.Sprintf("%d/%d %s", done, len(names), message), Pending: pending},
		done:     len(pending) == 0,
	}
}

// NodesLabelled waits until every named node carries at least one of the label=value pairs in anyOf, e.g.
// NFDGPULabels() after installing NFD. Progress reads "1/2 GPU nodes labelled by NFD", Pending the unlabelled
// nodes. A node that does not exist (yet) counts as not labelled.
func (w *Waiter) NodesLabelled(ctx context.Context, nodes []string, anyOf map[string]string) error {
	if len(anyOf) == 0 {
		return fmt.Errorf("wait for node labels: no labels given")
	}
	names := SortedUniqueNames(nodes)
	if len(names) == 0 {
		return nil
	}
	src := w.nodeSource(names, "", slices.Collect(maps.Keys(anyOf))...)
	labelled := func(n *corev1.Node) bool {
		for k, v := range anyOf {
			if got, ok := n.Labels[k]; ok && got == v {
				return true
			}
		}
		return false
	}
	return w.until(ctx, waitSpec{
		what:            "NFD labels on " + nodesPhrase(names),
		sources:         []*source{src},
		pendingAreNodes: true,
		eval: func(time.Time) verdict {
			return countNodes(names, cachedNodes(src), labelled, "GPU nodes labelled by NFD")
		},
	})
}

// GPUsAllocatable waits until every named node has allocatable nvidia.com/gpu > 0, or an nvidia.com/mig-*
// resource > 0 (the mixed MIG strategy advertises those instead; NVIDIA/gpu-operator
// controllers/state_manager.go@v26.7.0). Progress reads "1/2 GPU nodes advertise nvidia.com/gpu".
func (w *Waiter) GPUsAllocatable(ctx context.Context, nodes []string) error {
	names := SortedUniqueNames(nodes)
	if len(names) == 0 {
		return nil
	}
	src := w.nodeSource(names, "")
	return w.until(ctx, waitSpec{
		what:            "allocatable GPUs on " + nodesPhrase(names),
		sources:         []*source{src},
		pendingAreNodes: true,
		eval: func(time.Time) verdict {
			return countNodes(names, cachedNodes(src), hasAllocatableGPU, "GPU nodes advertise "+GPUResource)
		},
	})
}

func hasAllocatableGPU(n *corev1.Node) bool {
	for name, q := range n.Status.Allocatable {
		if (name == GPUResource || strings.HasPrefix(string(name), migResourcePrefix)) && q.Cmp(resource.Quantity{}) > 0 {
			return true
		}
	}
	return false
}

// nodesPhrase names a set of nodes for an error: "node gpu-1" or "3 nodes".
func nodesPhrase(names []string) string {
	if len(names) == 1 {
		return "node " + names[0]
	}
	return fmt.Sprintf("%d nodes", len(names))
}
