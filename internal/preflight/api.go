package preflight

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/discovery"

	"github.com/gpuctl/gpuctl/internal/distro"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// checkAPI: the API server answers and detection could read the cluster. Every other check needs
// both, so it is Fatal.
func checkAPI(ctx context.Context, env *Env) Result {
	if env.Kube == nil {
		return fail("no Kubernetes client", "check --kubeconfig and --context")
	}
	v, err := discovery.ToServerVersionInterfaceWithContext(env.Kube.Discovery()).ServerVersionWithContext(ctx)
	if err != nil {
		return fail("the API server did not answer: "+err.Error(),
			"check that kubectl uses the cluster you mean (kubectl config current-context, kubectl cluster-info), or pass --kubeconfig and --context")
	}
	if env.DetectError != nil {
		return fail("the API server answered ("+v.GitVersion+"), but reading the cluster failed: "+env.DetectError.Error(),
			"gpuctl detect shows what it can read; it needs at least to list nodes")
	}
	msg := v.GitVersion
	if d := env.Detection; d != nil && d.Distribution.Name != "" {
		msg += ", " + d.Distribution.Name
	}
	return pass(msg)
}

// checkAutopilot: GKE Autopilot does not admit the operator's privileged DaemonSets, and NVIDIA
// supports GKE Standard only (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html).
func checkAutopilot(_ context.Context, env *Env) Result {
	if r, ok := needDetection(env); !ok {
		return r
	}
	d := env.Detection
	if d.Autopilot != nil && d.Autopilot.Detected {
		return fail("this is a GKE Autopilot cluster: it does not allow the GPU operator's privileged DaemonSets, and NVIDIA supports GKE Standard only",
			"use a GKE Standard cluster, or GKE Autopilot's own GPU support without the GPU operator")
	}
	if d.Distribution.Name != distro.GKE {
		return skip("does not apply: not GKE")
	}
	return pass("GKE Standard")
}

// checkPlan: plan.Build accepted the cluster and the values, and the charts render with them.
func checkPlan(_ context.Context, env *Env) Result {
	if env.PlanError != nil {
		hint := "resolve what the message names (a value from --profile, -f or --set, or what the failed checks below report), then run gpuctl check --pre again"
		if errors.Is(env.PlanError, plan.ErrUnsupported) {
			hint = "gpuctl does not install on this cluster: the message says what to use instead"
		}
		return fail(env.PlanError.Error(), hint)
	}
	if r, ok := needPlan(env); !ok {
		return r
	}
	p := env.Plan
	run := 0
	for _, s := range p.Steps {
		if s.Skip == "" {
			run++
		}
	}
	return pass(fmt.Sprintf("profile %s, %d steps into namespace %s", p.Profile, run, p.Namespace))
}
