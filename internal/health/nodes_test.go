package health

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestNodesLabelled(t *testing.T) {
	t.Run("the wait ends when NFD labels the last node and reports each node as it is labelled", func(t *testing.T) {
		c := fake.NewClientset(testNode("gpu-1", nil), testNode("gpu-2", nil), testNode("cpu-1", nil))
		rec := newRecorder()
		w := &Waiter{Kube: c, OnProgress: rec.on}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		errc := run(ctx, func(ctx context.Context) error {
			return w.NodesLabelled(ctx, []string{"gpu-2", "gpu-1"}, NFDGPULabels())
		})

		first := rec.waitForMessage(t, "0/2 GPU nodes labelled by NFD")
		if !slices.Equal(first.Pending, []string{"gpu-1", "gpu-2"}) {
			t.Errorf("pending = %v, want both nodes", first.Pending)
		}
		mutateNode(t, c, "gpu-1", setLabel("feature.node.kubernetes.io/pci-10de.present", "true"))
		p := rec.waitForMessage(t, "1/2 GPU nodes labelled by NFD")
		if !slices.Equal(p.Pending, []string{"gpu-2"}) || p.Done != 1 || p.Total != 2 {
			t.Errorf("progress = %+v, want 1/2 with gpu-2 pending", p)
		}
		mutateNode(t, c, "cpu-1", setLabel("feature.node.kubernetes.io/pci-0300_10de.present", "true")) // not asked for
		mutateNode(t, c, "gpu-2", setLabel("feature.node.kubernetes.io/pci-10de.present", "false"))     // wrong value
		select {
		case err := <-errc:
			t.Fatalf("the wait returned %v before gpu-2 was labelled", err)
		case <-time.After(200 * time.Millisecond):
		}
		mutateNode(t, c, "gpu-2", setLabel("feature.node.kubernetes.io/pci-0302_10de.present", "true"))
		if err := result(t, errc); err != nil {
			t.Fatalf("NodesLabelled() = %v", err)
		}
		if last := rec.all()[len(rec.all())-1]; last.Message != "2/2 GPU nodes labelled by NFD" || len(last.Pending) != 0 {
			t.Errorf("last progress = %+v, want 2/2 and nothing pending", last)
		}
	})

	t.Run("a single node is watched with a field selector on its name", func(t *testing.T) {
		c := fake.NewClientset(testNode("gpu-1", map[string]string{"feature.node.kubernetes.io/pci-10de.present": "true"}))
		w := &Waiter{Kube: c}
		if err := w.NodesLabelled(context.Background(), []string{"gpu-1"}, NFDGPULabels()); err != nil {
			t.Fatal(err)
		}
		var selectors []string
		for _, a := range c.Actions() {
			if l, ok := a.(k8stesting.ListAction); ok && a.GetResource().Resource == "nodes" {
				selectors = append(selectors, l.GetListRestrictions().Fields.String())
			}
		}
		if len(selectors) != 1 || selectors[0] != "metadata.name=gpu-1" {
			t.Errorf("node LIST field selectors = %q, want one LIST with metadata.name=gpu-1", selectors)
		}
	})

	t.Run("no nodes means nothing to wait for", func(t *testing.T) {
		w := &Waiter{Kube: fake.NewClientset()}
		if err := w.NodesLabelled(context.Background(), nil, NFDGPULabels()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestGPUsAllocatable(t *testing.T) {
	tests := []struct {
		name     string
		resource string
		quantity string
	}{
		{name: "the wait ends when the device plugin advertises nvidia.com/gpu", resource: "nvidia.com/gpu", quantity: "8"},
		{name: "a MIG resource counts as allocatable GPUs", resource: "nvidia.com/mig-1g.10gb", quantity: "7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientset(testNode("gpu-1", nil), testNode("gpu-2", nil))
			rec := newRecorder()
			w := &Waiter{Kube: c, OnProgress: rec.on}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			errc := run(ctx, func(ctx context.Context) error { return w.GPUsAllocatable(ctx, []string{"gpu-1", "gpu-2"}) })
			rec.waitForMessage(t, "0/2 GPU nodes advertise nvidia.com/gpu")
			mutateNode(t, c, "gpu-1", setAllocatable(tt.resource, tt.quantity))
			mutateNode(t, c, "gpu-2", setAllocatable(tt.resource, "0"))
			p := rec.waitForMessage(t, "1/2 GPU nodes advertise nvidia.com/gpu")
			if !slices.Equal(p.Pending, []string{"gpu-2"}) {
				t.Errorf("pending = %v, want gpu-2 (0 GPUs is not allocatable)", p.Pending)
			}
			mutateNode(t, c, "gpu-2", setAllocatable(tt.resource, tt.quantity))
			if err := result(t, errc); err != nil {
				t.Fatalf("GPUsAllocatable() = %v", err)
			}
		})
	}
}

// TestSortedUniqueNames: the node names every wait and the runner count, sorted, once each, never "".
func TestSortedUniqueNames(t *testing.T) {
	tests := []struct {
		in, want []string
	}{
		{nil, []string{}},
		{[]string{"b", "a", "b"}, []string{"a", "b"}},
		{[]string{"", "gpu-1", "", "gpu-0"}, []string{"gpu-0", "gpu-1"}},
	}
	for _, tc := range tests {
		in := slices.Clone(tc.in)
		if got := SortedUniqueNames(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("SortedUniqueNames(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if !slices.Equal(tc.in, in) {
			t.Errorf("SortedUniqueNames changed its argument to %q", tc.in)
		}
	}
}
