package controlplane

import (
	"fmt"
	"slices"
	"strings"
)

// A simulated node has no GPU to run a CUDA program on, so kwok stands in for the container: a pod
// that runs to completion (restartPolicy Never or OnFailure) and asks for a GPU finishes at once,
// exit code 0 on a healthy GPU node and 1 on a node the scenario marks broken
// (Scenario.BrokenGPUNodes). A pod asks for a GPU with a limit of nvidia.com/gpu or of a MIG
// resource (nvidia.com/mig-<profile>, the mixed strategy), or with a ResourceClaim (the sandbox's
// only DRA driver publishes GPUs). Such a pod can only have been scheduled on a node that advertises
// the resource, or once the scheduler allocated its claim from the node's devices, so the stage needs
// no look at the node. Long-running GPU pods (restartPolicy Always) and every other pod keep kwok's
// own stages (pod-ready, pod-complete for Jobs' pods).
//
// kwok picks among the stages that match a pod at random, weighted by each stage's weight; a stage of
// weight 0 is never picked while one of positive weight matches
// (sigs.k8s.io/kwok pkg/utils/lifecycle/lifecycle.go@v0.8.0, Lifecycle.Match). kwok's pod-ready stage
// has weight 0, so giving these stages weight 1 makes them win for the pods they select.

// gpuRequestQuery is the jq query (kwok's selectors run gojq) that yields true for a pod asking for a
// GPU, and nothing for any other pod (the selector's Exists then does not match).
const gpuRequestQuery = `if ([.spec.containers[] | (.resources.limits // {}) | keys[] | select(. == "nvidia.com/gpu" or startswith("nvidia.com/mig-"))] | length) > 0 ` +
	`or ((.spec.resourceClaims // []) | length) > 0 then true else empty end`

// gpuWorkloadStages returns the kwok Stage documents for GPU workloads; broken names the nodes whose
// GPU fails every workload.
func gpuWorkloadStages(broken []string) string {
	var b strings.Builder
	healthy := ""
	if len(broken) > 0 {
		healthy = nodeNameRequirement("NotIn", broken)
	}
	b.WriteString(gpuWorkloadStage("gpu-workload-complete", healthy, 0, "Completed", "", "Succeeded"))
	if len(broken) > 0 {
		b.WriteString("\n---\n")
		b.WriteString(gpuWorkloadStage("gpu-workload-fail-broken-gpu", nodeNameRequirement("In", broken), 1, "Error",
			"the sandbox simulates a broken GPU on this node", "Failed"))
	}
	return b.String()
}

func nodeNameRequirement(op string, nodes []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "    - key: '.spec.nodeName'\n      operator: '%s'\n      values:\n", op)
	for _, n := range slices.Sorted(slices.Values(nodes)) {
		fmt.Fprintf(&b, "      - %q\n", n)
	}
	return b.String()
}

func gpuWorkloadStage(name, nodeRequirement string, exitCode int, reason, message, phase string) string {
	msg := ""
	if message != "" {
		msg = fmt.Sprintf("\n            message: %q", message)
	}
	return fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: %s
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Pending'
    - key: '.spec.restartPolicy'
      operator: 'In'
      values:
      - 'Never'
      - 'OnFailure'
    - key: '%s'
      operator: 'Exists'
%s  weight: 1
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        reason: PodCompleted
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        reason: PodCompleted
        type: ContainersReady
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: %d
            finishedAt: {{ $now | Quote }}
            reason: %s%s
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: %s
      startTime: {{ $now | Quote }}
`, name, gpuRequestQuery, nodeRequirement, exitCode, reason, msg, phase)
}
