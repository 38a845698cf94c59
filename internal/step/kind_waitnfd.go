package step

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// nfdLabelPrefix starts every label NFD sets (NVIDIA/gpu-operator controllers/state_manager.go@v26.7.0).
const nfdLabelPrefix = "feature.node.kubernetes.io/"

// waitNFD is the kind that waits until NFD has labelled the GPU nodes (doWaitNFD).
func waitNFD() Kind {
	return waiting{do: func(ctx context.Context, x *executor, _ *plan.Step, progress func(health.Progress)) (runner.Outcome, error) {
		return x.waitNFD(ctx, progress)
	}, needs: func(_ *plan.Step, ns string) []preflight.Access {
		// The nodes' labels and NFD's worker DaemonSet (in any namespace: another NFD counts too).
		return append(access("", "", "nodes", "get", "list", "watch"), access("", "apps", "daemonsets", "list", "watch")...)
	}}
}

// waitNFD waits until NFD has labelled the GPU nodes, and settles which nodes those are. When
// detection already knew the GPU nodes (capacity, cloud accelerator labels, instance types), it waits
// for each of them to get the PCI label. When it knew none (bare metal, kubeadm), it waits for NFD's
// first pass — the worker DaemonSet rolled out and as many nodes labelled as it has pods — and takes
// the nodes NFD found an NVIDIA PCI device on.
func (x *executor) waitNFD(ctx context.Context, progress func(health.Progress)) (runner.Outcome, error) {
	pci := health.NFDGPULabels()
	if len(x.plan.GPUNodes) > 0 {
		if err := x.waiter(progress).NodesLabelled(ctx, x.plan.GPUNodes, pci); err != nil {
			return runner.Outcome{}, err
		}
	} else if err := x.waitNFDFirstPass(ctx, progress); err != nil {
		return runner.Outcome{}, err
	}
	nodes, err := x.clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return runner.Outcome{}, err
	}
	gpu := append([]string(nil), x.plan.GPUNodes...)
	for _, n := range nodes.Items {
		for k, v := range pci {
			if n.Labels[k] == v {
				gpu = append(gpu, n.Name)
			}
		}
	}
	x.gpuNodes = health.SortedUniqueNames(gpu)
	if len(x.gpuNodes) == 0 {
		return runner.Outcome{}, &runner.StepError{
			Err:  fmt.Errorf("NFD labelled the nodes and found no NVIDIA PCI device (vendor 10de) on any"),
			Hint: "check that the GPU nodes have joined and that nfd-worker runs on them (kubectl get pods -A -l app.kubernetes.io/name=node-feature-discovery -o wide)",
		}
	}
	return runner.Outcome{Message: fmt.Sprintf("%d GPU nodes: %s", len(x.gpuNodes), strings.Join(x.gpuNodes, ", "))}, nil
}

// waitNFDFirstPass waits for the NFD worker DaemonSet (ours or another, recognised as detection
// recognises it) to be rolled out, then for as many nodes to carry NFD labels as it runs pods.
func (x *executor) waitNFDFirstPass(ctx context.Context, progress func(health.Progress)) error {
	worker, err := x.nfdWorker(ctx)
	if err != nil {
		return err
	}
	desired, err := x.waitNFDWorkersReady(ctx, worker, progress)
	if err != nil {
		return fmt.Errorf("NFD worker DaemonSet %s/%s not ready: %w", worker.Namespace, worker.Name, err)
	}
	if err := x.waitNFDLabels(ctx, desired, progress); err != nil {
		return fmt.Errorf("NFD has not labelled its nodes: %w", err)
	}
	return nil
}

// nfdWorker finds the NFD worker DaemonSet, in whatever namespace it runs.
func (x *executor) nfdWorker(ctx context.Context) (*appsv1.DaemonSet, error) {
	dss, err := x.clients.Kube.AppsV1().DaemonSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range dss.Items {
		if detect.Classify(detect.WorkloadFromDaemonSet(&dss.Items[i])) == detect.ComponentNFDWorker {
			return &dss.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no NFD worker DaemonSet found")
}

// waitNFDWorkersReady watches the worker DaemonSet until its current spec is ready on every node it
// wants, and returns how many that is.
func (x *executor) waitNFDWorkersReady(ctx context.Context, worker *appsv1.DaemonSet, progress func(health.Progress)) (int32, error) {
	ds := x.clients.Kube.AppsV1().DaemonSets(worker.Namespace)
	sel := fields.OneTermEqualSelector("metadata.name", worker.Name).String()
	var desired int32
	_, err := watchtools.UntilWithSync(ctx, &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return ds.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return ds.Watch(ctx, o)
		},
	}, &appsv1.DaemonSet{}, nil, func(ev watch.Event) (bool, error) {
		d, ok := ev.Object.(*appsv1.DaemonSet)
		if !ok {
			return false, nil
		}
		st := d.Status
		desired = st.DesiredNumberScheduled
		progress(health.Progress{Done: int(st.NumberReady), Total: int(desired), Message: fmt.Sprintf("%d/%d NFD workers ready", st.NumberReady, desired)})
		return st.ObservedGeneration >= d.Generation && desired > 0 && st.NumberReady == desired && st.UpdatedNumberScheduled == desired, nil
	})
	return desired, err
}

// waitNFDLabels watches the nodes until NFD has labelled as many as its workers run on.
func (x *executor) waitNFDLabels(ctx context.Context, desired int32, progress func(health.Progress)) error {
	labelled := map[string]bool{}
	_, err := watchtools.UntilWithSync(ctx, cache.NewListWatchFromClient(x.clients.Kube.CoreV1().RESTClient(), "nodes", "", fields.Everything()),
		&corev1.Node{}, nil, func(ev watch.Event) (bool, error) {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				return false, nil
			}
			labelled[n.Name] = ev.Type != watch.Deleted && hasLabelPrefix(n.Labels, nfdLabelPrefix)
			done := 0
			for _, l := range labelled {
				if l {
					done++
				}
			}
			progress(health.Progress{Done: done, Total: int(desired), Message: fmt.Sprintf("%d/%d nodes labelled by NFD", done, desired)})
			return done >= int(desired), nil
		})
	return err
}

func hasLabelPrefix(labels map[string]string, prefix string) bool {
	for k := range labels {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}
