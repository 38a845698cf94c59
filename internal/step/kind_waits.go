package step

import (
	"context"
	"fmt"
	"slices"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// The waits on the GPU stack itself: each reads through package health's watches (list and watch)
// and, when it fails, is explained by the operator's own diagnosis.

// waitOperator waits for the operator Deployment to be Available.
func waitOperator() Kind {
	return waiting{do: func(ctx context.Context, x *executor, s *plan.Step, progress func(health.Progress)) (runner.Outcome, error) {
		err := x.waiter(progress).DeploymentAvailable(ctx, x.plan.Namespace, s.Target)
		return runner.Outcome{Message: "Deployment " + s.Target + " is Available"}, err
	}, needs: func(_ *plan.Step, ns string) []preflight.Access {
		return append(access(ns, "apps", "deployments", "list", "watch"), access(ns, "", "pods", "list", "watch")...)
	}}
}

// waitValidators waits for a Ready nvidia-operator-validator pod on every GPU node; the operator may
// label GPU nodes NFD had not when the earlier steps ran, and those count from then on.
func waitValidators() Kind {
	return waiting{explained: true, do: func(ctx context.Context, x *executor, _ *plan.Step, progress func(health.Progress)) (runner.Outcome, error) {
		validated, err := x.waiter(progress).ValidatorsReady(ctx, x.plan.Namespace, x.gpuNodes)
		if err == nil {
			x.gpuNodes = health.SortedUniqueNames(append(slices.Clone(x.gpuNodes), validated...))
		}
		return runner.Outcome{Message: fmt.Sprintf("%d/%d GPU nodes validated", len(validated), len(x.gpuNodes))}, err
	}, needs: stackReads}
}

// waitAllocatable waits for nvidia.com/gpu to be allocatable on every GPU node.
func waitAllocatable() Kind {
	return waiting{explained: true, do: func(ctx context.Context, x *executor, _ *plan.Step, progress func(health.Progress)) (runner.Outcome, error) {
		err := x.waiter(progress).GPUsAllocatable(ctx, x.gpuNodes)
		return runner.Outcome{Message: fmt.Sprintf("nvidia.com/gpu allocatable on %d nodes", len(x.gpuNodes))}, err
	}, needs: stackReads}
}

// waitPolicy waits for the ClusterPolicy to be ready with reason Reconciled.
func waitPolicy() Kind {
	return waiting{explained: true, do: func(ctx context.Context, x *executor, s *plan.Step, progress func(health.Progress)) (runner.Outcome, error) {
		err := x.waiter(progress).ClusterPolicyReady(ctx, s.Target)
		return runner.Outcome{Message: "ready (Reconciled)"}, err
	}, needs: stackReads}
}

// waitGPUCluster waits for the GPUCluster (--dra) to be ready with reason Reconciled.
func waitGPUCluster() Kind {
	return waiting{explained: true, do: func(ctx context.Context, x *executor, s *plan.Step, progress func(health.Progress)) (runner.Outcome, error) {
		err := x.waiter(progress).GPUClusterReady(ctx, s.Target)
		return runner.Outcome{Message: "ready (Reconciled)"}, err
	}, needs: func(s *plan.Step, ns string) []preflight.Access {
		gvr := health.GPUClusterResource()
		return append(stackReads(s, ns), access("", gvr.Group, gvr.Resource, "get", "list", "watch")...)
	}}
}

// waitResourceSlices waits for a ResourceSlice of the DRA driver on every GPU node (--dra).
func waitResourceSlices() Kind {
	return waiting{explained: true, do: func(ctx context.Context, x *executor, _ *plan.Step, progress func(health.Progress)) (runner.Outcome, error) {
		err := x.waiter(progress).ResourceSlicesPublished(ctx, plan.DRADriverName, x.gpuNodes)
		return runner.Outcome{Message: fmt.Sprintf("%s ResourceSlices on %d GPU nodes", plan.DRADriverName, len(x.gpuNodes))}, err
	}, needs: func(s *plan.Step, ns string) []preflight.Access {
		return append(stackReads(s, ns), access("", "resource.k8s.io", "resourceslices", "list", "watch")...)
	}}
}

// stackReads are what a wait on the stack reads, and the operator's diagnosis of a failed one: the
// nodes, the operand pods and DaemonSets, the ClusterPolicy.
func stackReads(_ *plan.Step, ns string) []preflight.Access {
	out := access("", "", "nodes", "get", "list", "watch")
	out = append(out, access(ns, "", "pods", "list", "watch")...)
	out = append(out, access(ns, "apps", "daemonsets", "list", "watch")...)
	return append(out, access("", "nvidia.com", "clusterpolicies", "get", "list", "watch")...)
}
