package health

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// NodesHaveLabel waits until every named node carries the label key, whatever its value: GPU feature
// discovery's nvidia.com/mig.capable is "true" or "false", and either answers the question a wait on
// it asks. Progress reads "1/2 <message>", Pending the nodes without it. A node that does not exist
// (yet) counts as without it.
func (w *Waiter) NodesHaveLabel(ctx context.Context, nodes []string, key, message string) error {
	names := SortedUniqueNames(nodes)
	if len(names) == 0 {
		return nil
	}
	src := w.nodeSource(names, "", key)
	return w.until(ctx, waitSpec{
		what:            "label " + key + " on " + nodesPhrase(names),
		sources:         []*source{src},
		pendingAreNodes: true,
		eval: func(time.Time) verdict {
			return countNodes(names, cachedNodes(src), func(n *corev1.Node) bool {
				_, ok := n.Labels[key]
				return ok
			}, message)
		},
	})
}
