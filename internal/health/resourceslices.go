package health

import (
	"context"
	"fmt"
	"slices"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// ResourceSliceCounts counts, per node, the ResourceSlices of driver among slices and the devices they
// publish. A DRA kubelet plugin publishes its node's devices as slices with spec.nodeName set
// (https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/).
func ResourceSliceCounts(items []resourcev1.ResourceSlice, driver string) (slicesPerNode, devicesPerNode map[string]int) {
	slicesPerNode, devicesPerNode = map[string]int{}, map[string]int{}
	for i := range items {
		s := &items[i]
		if s.Spec.Driver != driver || s.Spec.NodeName == nil || *s.Spec.NodeName == "" || s.DeletionTimestamp != nil {
			continue
		}
		slicesPerNode[*s.Spec.NodeName]++
		devicesPerNode[*s.Spec.NodeName] += len(s.Spec.Devices)
	}
	return slicesPerNode, devicesPerNode
}

// ResourceSlicesPublished waits until every node of nodes has a ResourceSlice of driver, that is until
// the DRA driver's kubelet plugin runs there and the scheduler can allocate its devices.
func (w *Waiter) ResourceSlicesPublished(ctx context.Context, driver string, nodes []string) error {
	nodes = SortedUniqueNames(slices.Clone(nodes))
	if len(nodes) == 0 {
		return fmt.Errorf("wait for resourceslices of %s: no GPU nodes to wait for", driver)
	}
	api := w.Kube.ResourceV1().ResourceSlices()
	field := fields.OneTermEqualSelector("spec.driver", driver).String()
	src := newSource("resourceslices", w.Kube, &resourcev1.ResourceSlice{},
		withSelectors("", field, asObject(api.List)),
		withSelectors("", field, api.Watch))
	return w.until(ctx, waitSpec{
		what:            "resourceslices of " + driver,
		sources:         []*source{src},
		pendingAreNodes: true,
		eval: func(time.Time) verdict {
			var items []resourcev1.ResourceSlice
			for _, o := range src.objects() {
				if s, ok := o.(*resourcev1.ResourceSlice); ok {
					items = append(items, *s)
				}
			}
			per, _ := ResourceSliceCounts(items, driver)
			var pending []string
			for _, n := range nodes {
				if per[n] == 0 {
					pending = append(pending, n)
				}
			}
			done := len(nodes) - len(pending)
			return verdict{done: len(pending) == 0, progress: Progress{Done: done, Total: len(nodes), Pending: pending,
				Message: fmt.Sprintf("%d/%d GPU nodes publish %s ResourceSlices", done, len(nodes), driver)}}
		},
	})
}
